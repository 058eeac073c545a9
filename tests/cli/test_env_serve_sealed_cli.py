"""`improve env --serve` gives a trainer only what `export` would: a task file holding a
sealed task is refused in one line, before anything is served or recorded; what it
serves is recorded as exported, so that no later seal seals what a policy trained on."""

from __future__ import annotations

import subprocess

from agentd.app.tasks import exported
from agentd.home import Home
from improver import load_tasks
from tests.cli.test_wallet_cli import one_error_line
from tests.examplekit import harvested, sealed


def test_a_task_file_holding_a_sealed_task_is_refused_in_one_line(agentd, home: Home) -> None:
    made = sealed(home)
    work = home.root / "work.json"  # every task harvested, the sealed ones among them
    keys = {t.content_key for t in made.seal.real_tasks}
    first = next(t for t in load_tasks(work).tasks if t.content_key in keys)
    before = home.routes.exported("invoices").exists()
    line = one_error_line(agentd("improve", "env", "--serve", "--port", "0", "--tasks", work))
    assert line.startswith(
        f"agentd: error: task {first.name} of {work} is not served: it is sealed, by seal {made.seal.id}"
    )
    assert line.endswith("agentd improve export invoices --out DIR)")
    assert home.routes.exported("invoices").exists() == before  # nothing recorded


def test_what_is_served_is_recorded_and_no_later_seal_takes_it(agentd, agentd_process, home: Home) -> None:
    work = harvested(home)
    proc = agentd_process(
        "improve", "env", "--serve", "--port", "0", "--tasks", work, stderr=subprocess.PIPE, text=True
    )
    try:
        assert "as an OpenEnv environment on http://127.0.0.1:" in proc.stderr.readline()
        record = home.routes.exported("invoices")
        assert proc.stderr.readline().strip() == (
            f"recorded as exported for training in {record}: no later seal takes them"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    served = load_tasks(work).tasks
    assert served and all(exported(home, "invoices").covers(t) for t in served)
    seal = one_error_line(agentd("improve", "seal", "invoices", "--tasks", work, "--wallet", "invoices"))
    assert "was exported for training: a model may have learnt it, so it cannot be sealed" in seal
