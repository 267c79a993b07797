"""The rtlab command line: one module per subcommand, one user-error type."""

from __future__ import annotations

import os
import sys
import traceback

import click

from rtlab import __version__
from rtlab.cli._common import EXIT_INTERNAL, EXIT_OUTPUT, EXIT_UNSUPPORTED, EXIT_USAGE, visible
from rtlab.cli.audit import audit
from rtlab.cli.bench import bench_group
from rtlab.cli.compare import compare
from rtlab.cli.explain import explain
from rtlab.cli.farm import farm_group
from rtlab.cli.import_ import import_group
from rtlab.cli.lava import lava_group
from rtlab.cli.list_ import list_cmd
from rtlab.cli.partition import partition_group
from rtlab.cli.plot import plot
from rtlab.cli.report import report
from rtlab.cli.run import run
from rtlab.cli.show import show
from rtlab.cli.tune import tune_group
from rtlab.cli.vm import vm_group
from rtlab.cli.watch import watch
from rtlab.errors import InternalError, OutputError, UnsupportedError, UserError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="rtlab")
def cli() -> None:
    """Does this Linux system meet a real-time latency requirement under load?

    Run experiments with rtlab-probe, store them, show and compare the results.

    --json prints machine-readable output on stdout (a flag, never a file name).
    Exit status: 0 ok, 1 a deadline or --fail-if threshold exceeded (or an audit FAIL),
    2 bad usage or input, 3 unsupported here, 4 internal error (set RTLAB_DEBUG=1 for
    the traceback), 130 interrupted. The results directory is --results DIR or
    $RTLAB_RESULTS (default ./results).
    """


cli.add_command(run)
cli.add_command(list_cmd)
cli.add_command(show)
cli.add_command(compare)
cli.add_command(explain)
cli.add_command(import_group)
cli.add_command(audit)
cli.add_command(report)
cli.add_command(plot)
cli.add_command(bench_group)
cli.add_command(farm_group)
cli.add_command(tune_group)
cli.add_command(partition_group)
cli.add_command(watch)
cli.add_command(lava_group)
cli.add_command(vm_group)


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
