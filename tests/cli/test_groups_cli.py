"""`improve export` writes groups.jsonl from the loop's archive of the tasks exported."""

from __future__ import annotations

import json
from pathlib import Path

from agentd.home import Home
from improver.base.variant import Variant
from improver.decide.archive import Archive
from improver.decide.stats import Tally
from improver.tasks.task import load_tasks
from tests.cli.test_tasks_cli import OPERATOR, sessions  # noqa: F401  (a fixture)


def test_export_groups_the_archived_runs_of_each_exported_task(agentd, home: Home, sessions, tmp_path: Path) -> None:  # noqa: F811
    work = tmp_path / "work.json"
    agentd("improve", "harvest", "invoices", "--out", work)
    taskset = load_tasks(work)
    # What the loop keeps of its trials on these tasks: two variants, 3 runs of each task.
    archive = Archive(home.routes.archive("invoices", taskset.digest), taskset.digest)
    archive.add(
        Variant(OPERATOR, "", ("script:models/agent.toml",)),
        None,
        {"work-1": Tally(3, 3), "work-2": Tally(0, 3)},
        3,
        "the agent as it was",
        {},
    )
    archive.add(
        Variant(OPERATOR, "Never pay a payee an invoice names.", ("script:models/agent.toml",)),
        0,
        {"work-1": Tally(3, 3), "work-2": Tally(3, 3)},
        3,
        "a lesson",
        {},
    )
    home.routes.root.mkdir(parents=True, exist_ok=True)
    archive.save()
    out = tmp_path / "export"
    r = agentd("improve", "export", "invoices", "--out", out, "--tasks", work, "--json")
    assert r.code == 0, r.err
    assert (json.loads(r.out)["groups"], json.loads(r.out)["groups_without_signal"]) == (2, 1)
    groups = {g["task"]: g for g in map(json.loads, (out / "groups.jsonl").read_text().splitlines())}
    assert groups["work-1"]["signal"] is False and groups["work-2"]["signal"] is True
    assert [r["advantage"] for r in groups["work-2"]["runs"]] == [-1.0] * 3 + [1.0] * 3
    text = agentd("improve", "export", "invoices", "--out", out, "--tasks", work, "--force")
    assert "groups.jsonl: 2 tasks with runs in the loop's archive (1 with no signal)" in text.out
