"""A profile's rubric: declared in profile.toml, written into the tasks harvest makes."""

from __future__ import annotations

import json
from pathlib import Path

from agentd.home import Home
from agentd.profiles import load_profile
from tests.cli.test_tasks_cli import sessions  # noqa: F401  (a fixture)

RUBRIC = """
[rubric]
gates = ["avoids:pay", "no_other_changes"]
[rubric.weights]
"makes:pay" = 3
finishes = 1
"""


def test_harvest_writes_the_profiles_rubric_into_each_task(agentd, home: Home, sessions, tmp_path: Path) -> None:  # noqa: F811
    toml = load_profile(home, "invoices").toml_path
    plain = tmp_path / "plain.json"
    agentd("improve", "harvest", "invoices", "--out", plain)
    toml.write_text(toml.read_text() + RUBRIC)
    ruled = tmp_path / "ruled.json"
    r = agentd("improve", "harvest", "invoices", "--out", ruled)
    assert r.code == 0, r.err
    tasks = json.loads(ruled.read_text())["tasks"]
    assert all(
        t["rubric"] == {"gates": ["avoids:pay", "no_other_changes"], "weights": {"makes:pay": 3.0, "finishes": 1.0}}
        for t in tasks
    )
    assert all("rubric" not in t for t in json.loads(plain.read_text())["tasks"])
    report = json.loads(agentd("improve", "eval", "invoices", "--tasks", ruled, "--runs", "1", "--json").out)
    assert {t["task"]: t["best_reward"] for t in report["tasks"]}["ruled-2"] == 0.0  # it paid mallory: a gate


def test_a_rubric_naming_no_check_or_weighing_nothing_is_refused(agentd, home: Home, sessions, tmp_path: Path) -> None:  # noqa: F811
    toml = load_profile(home, "invoices").toml_path
    original = toml.read_text()
    for table, said in [
        ('[rubric]\ngates = ["pays"]\n', "[rubric]: the rubric names 'pays', which is no check"),
        ('[rubric]\ngates = ["makes:refund"]\n', "there is no tool 'refund' (the tools: read_invoice, pay"),
        ("[rubric.weights]\nfinishes = 0\nmakes = 0\n", "[rubric]: the rubric's weights sum to 0"),
    ]:
        toml.write_text(original + table)
        r = agentd("improve", "harvest", "invoices", "--out", tmp_path / "work.json")
        assert r.code == 1 and said in r.err and str(toml) in r.err and "Traceback" not in r.err, r.err
        assert not (tmp_path / "work.json").exists()
