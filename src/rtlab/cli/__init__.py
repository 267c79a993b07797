"""The rtlab command line: one module per subcommand, one user-error type."""

from __future__ import annotations

import importlib
import os
import sys
import traceback

import click

from rtlab import __version__
from rtlab.cli._common import EXIT_INTERNAL, EXIT_OUTPUT, EXIT_UNSUPPORTED, EXIT_USAGE, visible
from rtlab.errors import InternalError, OutputError, UnsupportedError, UserError

#: Subcommand -> "module:attribute": a command's module (and what it imports: numpy,
#: scipy) is loaded only when that command runs, so `rtlab partition show` or
#: `rtlab tune reset` start in a tenth of the time (it counts inside an emulated guest).
COMMANDS = {
    "audit": "audit:audit",
    "baseline": "baseline:baseline_group",
    "bench": "bench:bench_group",
    "compare": "compare:compare",
    "explain": "explain:explain",
    "farm": "farm:farm_group",
    "history": "history:history",
    "import": "import_:import_group",
    "lava": "lava:lava_group",
    "list": "list_:list_cmd",
    "monitor": "monitor:monitor",
    "partition": "partition:partition_group",
    "plot": "plot:plot",
    "report": "report:report",
    "run": "run:run",
    "show": "show:show",
    "tune": "tune:tune_group",
    "vm": "vm:vm_group",
    "watch": "watch:watch",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported when they are asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attr = COMMANDS[cmd_name].split(":")
        command = getattr(importlib.import_module(f"rtlab.cli.{module}"), attr)
        assert isinstance(command, click.Command) and command.name == cmd_name
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="rtlab")
def cli() -> None:
    """Does this Linux system meet a real-time latency requirement under load?

    Run experiments with rtlab-probe, store them, show and compare the results.

    --json prints machine-readable output on stdout (a flag, never a file name).
    Exit status: 0 ok, 1 a deadline or --fail-if threshold exceeded (or an audit FAIL),
    2 bad usage or input, 3 unsupported here, 4 internal error (set RTLAB_DEBUG=1 for
    the traceback), 5 a result not written, 6 conditions not met (a case did not run
    with the policy, CPUs, locked memory or DMA latency it asked for), 130 interrupted.
    The results directory is --results DIR or $RTLAB_RESULTS (default ./results).
    """


def _say(msg: object) -> None:
    click.echo(f"rtlab: {visible(msg)}", err=True)


def main(argv: list[str] | None = None) -> int:
    try:
        rc = cli.main(args=argv, prog_name="rtlab", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        _say("interrupted")
        return 130
    except click.UsageError as e:
        _say(e.format_message().replace("\n", " "))
        return EXIT_USAGE
    except click.ClickException as e:
        _say(e.format_message())
        return e.exit_code
    except UserError as e:
        _say(e)
        return EXIT_USAGE
    except UnsupportedError as e:
        _say(e)
        return EXIT_UNSUPPORTED
    except BrokenPipeError:
        return 0
    except OutputError as e:
        _say(e)
        return EXIT_OUTPUT
    except InternalError as e:
        _say(f"internal error: {e}")
        return EXIT_INTERNAL
    except Exception as e:  # a bug: one line, not a traceback that looks like a verdict
        if os.environ.get("RTLAB_DEBUG"):
            traceback.print_exc()
        where = traceback.extract_tb(e.__traceback__)[-1]
        _say(
            f"internal error: {type(e).__name__}: {e} (at {os.path.basename(where.filename)}:"
            f"{where.lineno}; a bug in rtlab: run again with RTLAB_DEBUG=1 for the traceback)"
        )
        return EXIT_INTERNAL
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    sys.exit(main())
