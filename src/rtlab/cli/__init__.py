"""The rtlab command line: one module per subcommand, one user-error type."""

from __future__ import annotations

import sys

import click

from rtlab import __version__
from rtlab.cli._common import EXIT_UNSUPPORTED, EXIT_USAGE
from rtlab.cli.audit import audit
from rtlab.cli.compare import compare
from rtlab.cli.import_ import import_group
from rtlab.cli.list_ import list_cmd
from rtlab.cli.plot import plot
from rtlab.cli.report import report
from rtlab.cli.run import run
from rtlab.cli.show import show
from rtlab.errors import UnsupportedError, UserError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rtlab")
def cli() -> None:
    """Does this Linux system meet a real-time latency requirement under load?

    Run experiments with rtlab-probe, store them, show and compare the results.
    """


cli.add_command(run)
cli.add_command(list_cmd)
cli.add_command(show)
cli.add_command(compare)
cli.add_command(import_group)
cli.add_command(audit)
cli.add_command(report)
cli.add_command(plot)


def main(argv: list[str] | None = None) -> int:
    try:
        rc = cli.main(args=argv, prog_name="rtlab", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("rtlab: interrupted", err=True)
        return 130
    except click.UsageError as e:
        msg = e.format_message().replace("\n", " ")
        click.echo(f"rtlab: {msg}", err=True)
        return EXIT_USAGE
    except click.ClickException as e:
        click.echo(f"rtlab: {e.format_message()}", err=True)
        return e.exit_code
    except UserError as e:
        click.echo(f"rtlab: {e}", err=True)
        return EXIT_USAGE
    except UnsupportedError as e:
        click.echo(f"rtlab: {e}", err=True)
        return EXIT_UNSUPPORTED
    except BrokenPipeError:
        return 0
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    sys.exit(main())
