"""`agentd serve`: the daemon in the foreground (see agentd/server/daemon.py)."""

from __future__ import annotations

import click

from agentd.cli.options import App, pass_app
from agentd.server.daemon import ServeOptions, serve, systemd_unit


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
    same home is refused, naming the pid of the first."""
    options = ServeOptions(host, port, json_logs, stop_timeout)
    if print_systemd_unit:
        click.echo(systemd_unit(app.home, options), nl=False)
        return 0
    return serve(app.home, options)
