"""The `agentd` command line: a thin layer over library calls.

Each command group lives in its own module and is registered here. Errors that the user
can act on become one line on stderr (`agentd: error: ...`) and a non-zero exit.
"""

from __future__ import annotations

import sys

import click

from agentd import __version__
from agentd.cli.options import EXIT_ERROR, EXIT_INTERRUPTED, App
from agentd.errors import AgentdError
from agentd.home import Home
from improver import ImproverError
from ledger import LedgerError

USER_ERRORS = (AgentdError, LedgerError, ImproverError)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--home",
    type=click.Path(file_okay=False),
    envvar="AGENTD_HOME",
    help="Where agentd keeps its state (default: $AGENTD_HOME, else ~/.agentd).",
)
@click.version_option(__version__, prog_name="agentd")
@click.pass_context
def cli(ctx: click.Context, home: str | None) -> None:
    """agentd records an agent's sessions, turns them into tasks, and lets the agent
    improve itself on tasks sealed before anything is tried, with every step a signed
    entry in an append-only ledger that anyone can check offline.

    Data goes to stdout, progress and logs to stderr. Exit codes: 0 ok, 1 error,
    2 usage, 3 a check found something wrong, 130 interrupted.
    """
    ctx.obj = App(Home.resolve(home))


def invoke(argv: list[str] | None = None) -> int:
    """Runs one command line and returns its exit code; tests call this too."""
    try:
        result = cli.main(args=argv, prog_name="agentd", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except USER_ERRORS as exc:
        click.echo(f"agentd: error: {exc}", err=True)
        return EXIT_ERROR
    except (click.Abort, KeyboardInterrupt):
        click.echo("agentd: interrupted", err=True)
        return EXIT_INTERRUPTED


def main() -> None:
    sys.exit(invoke())


def _register() -> None:
    # Imported here so each group module can import `cli` helpers without a cycle.
    from agentd.cli import commands

    for command in commands.ALL:
        cli.add_command(command)


_register()
