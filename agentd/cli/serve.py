"""`agentd serve`: the daemon in the foreground (see agentd/server/daemon.py)."""

from __future__ import annotations

import click

from agentd.cli.options import App, pass_app
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.secrets import DAEMON_SECRETS
from agentd.server.daemon import EXIT_KEY_SHUT, ServeOptions, serve, systemd_unit
from agentd.wallets import LOG_PASSPHRASE_ENV, log_key, log_key_path


class KeyShut(AgentdError):
    """The log's key will not open: the daemon cannot sign, and no restart changes that."""

    exit_code = EXIT_KEY_SHUT


@click.command("serve", short_help="Run the daemon: schedules, the ledger over HTTP, status.")
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8470, show_default=True, help="The port to listen on.")
@click.option("--json-logs", is_flag=True, help="Log JSON objects, one a line, rather than text lines.")
@click.option(
    "--stop-timeout",
    type=click.FloatRange(min=1),
    default=60.0,
    show_default=True,
    help="On SIGTERM, wait this many seconds at most for running jobs to stop.",
)
@click.option("--print-systemd-unit", is_flag=True, help="Print a systemd unit that runs this daemon, and exit.")
@pass_app
def command(app: App, host: str, port: int, json_logs: bool, stop_timeout: float, print_systemd_unit: bool) -> int:
    """Run the daemon in the foreground: each profile's [schedule] jobs, the ledger and
    session intake over HTTP, /v1/status, /health and /metrics. Logs go to stderr, one
    line per event. SIGTERM or Ctrl-C stops it cleanly (exit 0); a second daemon on the
    same home is refused, naming the pid of the first.

    A log key that will not open (sealed, with AGENTD_LOG_PASSPHRASE missing or wrong)
    stops the start at once with exit 78, which the unit --print-systemd-unit prints does
    not restart; for a sealed key that unit reads the passphrase from HOME/serve.env."""
    options = ServeOptions(host, port, json_logs, stop_timeout)
    if print_systemd_unit:
        click.echo(systemd_unit(app.home, options), nl=False)
        return 0
    _open_log_key(app.home)
    return serve(app.home, options)


def _open_log_key(home: Home) -> None:
    """Opens the home's log key before anything starts, so that one that will not open
    (sealed, and its passphrase missing or wrong) stops the start with its own exit."""
    if not log_key_path(home).exists():
        return  # made on first use, for a log with no entries yet
    try:
        log_key(home)
    except AgentdError as exc:
        raise KeyShut(f"{exc}; a systemd unit reads {LOG_PASSPHRASE_ENV} from {home.root / DAEMON_SECRETS}") from None
