"""`agentd improve import bfcl|tau2`, from the command line to a seal and a loop on the
imported tasks with scripted models; and what bad input gets."""

from __future__ import annotations

import json
import os
import re
from importlib import resources
from pathlib import Path
from subprocess import PIPE

import pytest

from agentd.home import Home
from improver import load_tasks
from improver.benchmarks import bfcl
from tests.agentd.benchkit import needs

PROPOSER = resources.files("agentd") / "examples" / "invoices" / "models" / "proposer.toml"


def answering_script(path: Path, tasks: Path, right: int) -> Path:
    """A scripted agent that answers the first `right` tasks with their solutions' calls
    and every other one with no call at all."""
    rules = []
    for task in load_tasks(tasks).tasks[:right]:
        rules.append(f"[[rule]]\nturn = 1\ntask_matches = {json.dumps(re.escape(task.task.lower()[-60:]))}")
        for call in task.solution.calls:
            rules.append(f"[[rule.calls]]\nname = {json.dumps(call.tool)}\narguments = {_toml(call.arguments)}")
    rules.append('[[rule]]\ntext = "Done."')
    path.write_text("\n".join(rules) + "\n")
    return path


def _toml(value: object) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


@needs("bfcl_eval")
def test_bfcl_simple_imported_sealed_and_run_on(agentd, home: Home, tmp_path: Path) -> None:
    out = tmp_path / "bfcl.json"
    r = agentd("improve", "import", "bfcl", "--set", "simple_python", "--limit", "12", "--out", out, "--json")
    assert r.code == 0, r.err
    report = json.loads(r.out)
    assert report["imported"] == 12 and len(report["files"][str(out)]["kept"]) == 12
    taskset = load_tasks(out)
    assert taskset.validated and taskset.tasks[0].checks[0]["check"] == "call_set"
    script = answering_script(tmp_path / "agent.toml", out, right=8)
    assert agentd("profile", "new", "bfcl", "--model", f"script:{script}").code == 0
    r = agentd("improve", "seal", "bfcl", "--tasks", out, "--share", "50", "--canaries", "0", "--seed", "s")
    assert r.code == 0, r.err
    r = agentd("improve", "run", "bfcl", "--proposer", f"script:{PROPOSER}", "--runs", "1", "--baseline-runs", "1")
    assert r.code == 0, r.err + r.out


@needs("tau2")
def test_tau2_retail_split_sealed_by_its_test_split_and_run_on(agentd, home: Home, tmp_path: Path) -> None:
    out = tmp_path / "retail"
    r = agentd("improve", "import", "tau2", "--domain", "retail", "--limit", "14", "--split", "--out", out)
    assert r.code == 0, r.err
    assert "imported 14 tasks" in r.out
    train, test = load_tasks(out / "train.json"), load_tasks(out / "test.json")
    assert {t.source["split"] for t in train.tasks} == {"train"} and {t.source["split"] for t in test.tasks} == {"test"}
    assert all(t.world == {"kind": "tau2", "domain": "retail"} for t in (*train.tasks, *test.tasks))
    assert train.operator == (out / "policy.md").read_text()
    script = answering_script(tmp_path / "agent.toml", out / "train.json", right=3)
    operator = (out / "policy.md").read_text()
    assert agentd("profile", "new", "tau2-retail", "--operator", operator, "--model", f"script:{script}").code == 0
    r = agentd("improve", "seal", "tau2-retail", "--tasks", out / "train.json", "--sealed", out / "test.json", "--json")
    assert r.code == 0, r.err
    terms = json.loads(r.out)
    assert terms["sealed_tasks"] == len(test.tasks) and terms["train_tasks"] == len(train.tasks)
    # The agent, through its worlds: the tasks the script answers pass (those with nothing
    # to tell the customer), the others fail.
    r = agentd("improve", "eval", "tau2-retail", "--tasks", out / "train.json", "--runs", "1", "--json")
    passed = {t["task"]: t["passed"] for t in json.loads(r.out)["tasks"]}
    answered = {t.name for t in train.tasks[:3] if not any(c["check"] == "says" for c in t.checks)}
    assert {name for name, n in passed.items() if n} == answered and answered
    r = agentd(
        "improve", "run", "tau2-retail", "--proposer", f"script:{PROPOSER}", "--runs", "1", "--baseline-runs", "1"
    )
    assert r.code == 0, r.err + r.out
    # The same test split again is a second seal of sealed tasks: refused, naming one.
    r = agentd("improve", "seal", "tau2-retail", "--tasks", out / "train.json", "--sealed", out / "test.json")
    assert r.code != 0 and "sealed already" in r.err


@needs("bfcl_eval")
def test_a_seal_whose_sides_share_a_task_is_refused(agentd, home: Home, tmp_path: Path) -> None:
    out = tmp_path / "bfcl.json"
    assert agentd("improve", "import", "bfcl", "--set", "multiple", "--limit", "4", "--out", out).code == 0
    assert agentd("profile", "new", "bfcl").code == 0
    r = agentd("improve", "seal", "bfcl", "--tasks", out, "--sealed", out)
    assert r.code != 0 and "on both sides" in r.err
    assert not list(home.root.glob("routes/*"))  # nothing was sealed


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["bfcl", "--set", "simple", "--out", "x.json"], "no BFCL set named 'simple'; the sets are simple_python"),
        (["bfcl", "--set", "multi_turn_base", "--out", "x.json"], "not imported yet: its tasks run over stateful"),
        (["tau2", "--domain", "shop", "--out", "x"], "no τ² domain 'shop' is imported; the domains are airline"),
        (["tau2", "--domain", "telecom", "--out", "x"], "device of their own"),
    ],
)
def test_an_unknown_set_or_domain_names_the_known_ones(agentd, args: list[str], said: str, tmp_path: Path) -> None:
    r = agentd("improve", "import", *args)
    assert r.code == 2 and said in r.err and "Traceback" not in r.err
    assert not (tmp_path / "x.json").exists()


@needs("bfcl_eval")
def test_a_malformed_row_in_the_package_is_named_skipped_and_counted(
    agentd_process, home: Home, tmp_path: Path
) -> None:
    """A copy of BFCL's package with two broken rows in a set, found first on the path."""
    real = bfcl.data_dir()
    copy = tmp_path / "site" / "bfcl_eval"
    (copy / "data" / "possible_answer").mkdir(parents=True)
    (copy / "__init__.py").write_text("")
    lines = (real / "BFCL_v4_multiple.json").read_text().splitlines()[:5]
    lines[1] = '{"id": "multiple_1", "question": [[{"role": "user"'  # cut short
    lines[3] = '{"id": "multiple_3"}'  # no functions
    (copy / "data" / "BFCL_v4_multiple.json").write_text("\n".join(lines) + "\n")
    answers = real / "possible_answer" / "BFCL_v4_multiple.json"
    (copy / "data" / "possible_answer" / "BFCL_v4_multiple.json").write_text(answers.read_text())
    out = tmp_path / "multiple.json"
    env = {**os.environ, "PYTHONPATH": f"{copy.parent}:{os.environ.get('PYTHONPATH', '')}"}
    done = agentd_process(
        "improve", "import", "bfcl", "--set", "multiple", "--out", out, env=env, stdout=PIPE, stderr=PIPE
    )
    said, err = (b.decode() for b in done.communicate(timeout=120))
    assert done.returncode == 0, err
    assert "imported 3 tasks: 3 validated, 0 excluded, 2 skipped" in said
    assert "skipped BFCL_v4_multiple.json:2: not a JSON object" in err
    assert "skipped multiple_3: it has no id or no functions" in err
    assert [t.source["id"] for t in load_tasks(out).tasks] == ["multiple_0", "multiple_2", "multiple_4"]
