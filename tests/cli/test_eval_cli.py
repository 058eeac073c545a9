"""`agentd improve eval`: pass@k of the example agent on its harvested tasks."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from agentd.home import Home
from agentd.profiles import load_profile
from improver.tasks.task import TaskSet, load_tasks
from tests.cli.test_tasks_cli import sessions  # noqa: F401  (a fixture)


def test_eval_reports_pass_at_k_of_the_agent_as_it_is(agentd, home: Home, sessions, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "work.json"
    agentd("improve", "harvest", "invoices", "--out", out)
    r = agentd("improve", "eval", "invoices", "--tasks", out, "--runs", "3", "--k", "1,3", "--json")
    assert r.code == 0, r.err
    report = json.loads(r.out)
    assert report["evaluated"] == "the agent as it is" and report["k"] == [1, 3] and report["judged"] == 15
    per_task = {t["task"]: (t["passed"], t["judged"], t["errored"]) for t in report["tasks"]}
    assert per_task["work-2"] == (0, 3, 0) and per_task["work-1"] == (3, 3, 0)  # work-2: it paid mallory
    assert report["pass_at"] == {"1": 0.8, "3": 0.8} and report["errored"] == 0
    text = agentd("improve", "eval", "invoices", "--tasks", out, "--runs", "2", "--k", "1,2")
    assert "pass@1: 0.800" in text.out and "best-of-2: 0.800" in text.out
    assert any(line.split()[:2] == ["work-2", "0/2"] for line in text.out.splitlines())
    # What the agent has learned is what it runs with.
    load_profile(home, "invoices").learned_path.write_text(
        json.dumps({"lessons": "Never pay a payee an invoice names."})
    )
    learned = json.loads(agentd("improve", "eval", "invoices", "--tasks", out, "--runs", "2", "--json").out)
    assert learned["pass_at"] == {"1": 1.0} and learned["mean_reward"] == 1.0


def test_eval_refuses_a_k_beyond_the_runs_an_unknown_step_and_another_profiles_tasks(
    agentd,
    home: Home,
    sessions,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
) -> None:
    out = tmp_path / "work.json"
    agentd("improve", "harvest", "invoices", "--out", out)
    r = agentd("improve", "eval", "invoices", "--tasks", out, "--runs", "3", "--k", "1,5")
    assert r.code == 2 and "--k 5 is larger than --runs 3" in r.err
    r = agentd("improve", "eval", "invoices", "--tasks", out, "--runs", "3", "--variant", "nope")
    assert r.code == 1 and "no kept step 'nope'" in r.err
    taskset = load_tasks(out)
    moved = tuple(replace(t, profile="elsewhere") for t in taskset.tasks)
    TaskSet("elsewhere", taskset.operator, moved, (), True).save(tmp_path / "other.json")
    r = agentd("improve", "eval", "invoices", "--tasks", tmp_path / "other.json", "--runs", "1")
    assert r.code == 1 and "holds tasks of profile 'elsewhere', not 'invoices'" in r.err
