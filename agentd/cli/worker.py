"""`agentd worker`: run a trial queue's runs on this machine (agentd/app/worker.py)."""

from __future__ import annotations

import click

from agentd.app.trialqueue import BATCH
from agentd.app.worker import WorkerRequest, run_worker
from agentd.cli.options import App, pass_app, progress
from agentd.errors import WrongValue
from improver import TRIAL_CONCURRENCY


@click.command("worker", short_help="Run the trial queue's runs on this machine, results signed.")
@click.option(
    "--queue",
    metavar="URL",
    help="The trial queue: a PostgreSQL URL, ?schema=NAME&queue=NAME optional (default: the home's [trials] queue).",
)
@click.option("--wallet", default="worker", show_default=True, help="The wallet that signs each run's result.")
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=TRIAL_CONCURRENCY,
    show_default=True,
    help=f"Runs at once, each in a sandbox; no job (of up to {BATCH} runs) is claimed while this many wait or run here.",
)
@click.option(
    "--sealed",
    is_flag=True,
    help="Claim sealed tasks' runs too: publish a key, signed by the wallet, that a loop seals them to "
    "when it trusts that wallet.",
)
@click.option(
    "--heartbeat",
    type=click.FloatRange(min=0.05),
    default=WorkerRequest.heartbeat,
    show_default=True,
    help="Seconds between beats; a loop hands out again the runs of a worker silent for its [trials] lease (30 s).",
)
@pass_app
def command(app: App, queue: str | None, wallet: str, concurrency: int, sealed: bool, heartbeat: float) -> None:
    """Claim runs from the trial queue and run them here: in this machine's sandbox (its
    escape probes checked first; exit 3 if one gets out), with this home's models, each
    result signed by --wallet. Nothing is written to the ledger: the loop that gave the
    runs checks each result and records it. SIGTERM or Ctrl-C stops it when the runs under
    way end. While the loop's kill switch (or this home's) is on, it claims nothing."""
    url = queue or app.home.trials_queue
    if not url:
        raise WrongValue("give --queue URL (a PostgreSQL URL), or set [trials] queue in the home's config.toml")
    request = WorkerRequest(url, wallet, concurrency, sealed, heartbeat)
    answered = run_worker(app.home, request, progress)
    progress(f"stopped after answering {answered} runs")
