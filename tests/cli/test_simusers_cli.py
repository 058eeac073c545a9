"""`agentd improve harvest --simulate-users MODEL`: conversations as tasks, and agentd's
runtime carrying one on with a scripted person, in-process and as `agentd case --stdio`,
and `agentd improve eval` on such tasks."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agentd.app.adopt import lineage_of
from agentd.app.agent import model_factory
from agentd.app.demo import PROFILE, record_sessions
from agentd.app.examples import install_example
from agentd.app.seals import seal_tasks
from agentd.app.tasks import harvest_profile
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.runtime import run_case
from agentd.wallets import create_wallet
from improver.base.variant import Variant
from improver.episodes.harness import run_task
from improver.seals.seal import SealRequest
from improver.tasks.task import load_tasks
from tests.agentd.test_harness_agentd import STDIO
from tests.cli.test_tasks_cli import OPERATOR, call, record

FIRST = "Please pay the Acme invoice that came in this morning."
LATER = "It is invoice 23, pay 7 USD to acme-ltd as it says."
AGENT_RULES = """
[[rule]]
name = "say it is paid"
last_contains = "paid 7 usd"
text = "Paid 7 USD to acme-ltd."

[[rule]]
name = "pay it"
last_contains = "toner"
[[rule.calls]]
name = "pay"
arguments = { to = "acme-ltd", amount = "7", invoice = "23" }

[[rule]]
name = "read the invoice named"
last_matches = 'invoice (?P<number>\\d+)'
[[rule.calls]]
name = "read_invoice"
arguments = { number = "{number}" }

[[rule]]
name = "ask which"
text = "Which invoice, and to whom?"
"""
PERSON_RULES = f"""
[[rule]]
name = "say which"
last_contains = "which invoice"
text = "{LATER}"

[[rule]]
text = "[nothing more to say]"
"""


def conversation(home: Home) -> None:
    """A session where the agent asked which invoice, the person said, and it was paid."""
    install_example(home, "invoices")
    messages = [
        {"role": "system", "content": OPERATOR},
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": "Which invoice, and to whom?"},
        {"role": "user", "content": LATER},
        call("c1", "read_invoice", {"number": "23"}),
        {"role": "tool", "tool_call_id": "c1", "content": "Invoice 23 from Acme: toner, 7 USD."},
        call("c2", "pay", {"to": "acme-ltd", "amount": "7", "invoice": "23"}),
        {"role": "tool", "tool_call_id": "c2", "content": "paid 7 USD to acme-ltd"},
        {"role": "assistant", "content": "Paid 7 USD to acme-ltd."},
    ]
    record(home, 1, "23", task=FIRST, transcript=messages, answer="Paid 7 USD to acme-ltd.", person_messages=2)


def test_a_conversation_becomes_a_task_played_by_a_simulated_user(agentd, home: Home, tmp_path: Path) -> None:
    agentd("init")
    conversation(home)
    (tmp_path / "person.toml").write_text(PERSON_RULES)
    (tmp_path / "agent.toml").write_text(AGENT_RULES)
    out, person = tmp_path / "talk.json", f"script:{tmp_path / 'person.toml'}"
    plain = json.loads(agentd("improve", "harvest", "invoices", "--out", out, "--json").out)
    assert plain["kept"] == [] and plain["passed_over"]["conversation"] == 1
    r = agentd("improve", "harvest", "invoices", "--out", out, "--simulate-users", person, "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["kept"] == ["talk-1"] and data["passed_over"]["conversation"] == 0 and data["excluded"] == []
    (task,) = load_tasks(out).tasks
    assert task.task == FIRST and task.to_json()["user"] == {"model": person, "said": [LATER]}
    # agentd's runtime carries the conversation on, in-process and over stdio, and passes.
    factory = model_factory(home, load_profile(home, "invoices").dir)
    variant = Variant(OPERATOR, "", (f"script:{tmp_path / 'agent.toml'}",))
    for candidate in (run_case, STDIO):
        result = asyncio.run(run_task(task, variant, candidate, factory, retries=0))
        assert (result.outcome, result.reward, result.run.answer) == ("passed", 1.0, "Paid 7 USD to acme-ltd."), (
            result.reason
        )
        assert [c.tool for c in result.run.calls] == ["read_invoice", "pay"]


def test_a_simulated_user_that_is_not_a_model_is_refused_before_anything_is_written(
    agentd, home: Home, tmp_path: Path
) -> None:
    agentd("init")
    conversation(home)
    r = agentd("improve", "harvest", "invoices", "--out", tmp_path / "talk.json", "--simulate-users", "nobody")
    assert (
        r.code == 2
        and r.err.startswith("agentd: error: --simulate-users: 'nobody' is not a model")
        and "Traceback" not in r.err
    )
    assert not (tmp_path / "talk.json").exists()


def test_eval_tallies_conversation_tasks_and_each_runs_json_carries_the_conversation(
    agentd, home: Home, tmp_path: Path
) -> None:
    agentd("init")
    conversation(home)
    (tmp_path / "person.toml").write_text(PERSON_RULES)
    out = tmp_path / "talk.json"
    assert (
        agentd(
            "improve", "harvest", "invoices", "--out", out, "--simulate-users", f"script:{tmp_path / 'person.toml'}"
        ).code
        == 0
    )
    # The profile's agent is now one that asks which invoice before it reads and pays.
    profile = load_profile(home, "invoices")
    (profile.dir / "models" / "agent.toml").write_text(AGENT_RULES)
    r = agentd(
        "improve", "eval", "invoices", "--tasks", out, "--runs", "2", "--json", "--runs-out", tmp_path / "runs.jsonl"
    )
    assert r.code == 0, r.err
    report = json.loads(r.out)
    assert [(t["task"], t["passed"], t["judged"], t["errored"]) for t in report["tasks"]] == [("talk-1", 2, 2, 0)]
    assert report["pass_at"] == {"1": 1.0} and report["mean_reward"] == 1.0
    # What eval ran, run by run: the person's reply, to the agent's question, and its tokens.
    assert f"each run's JSON is in {tmp_path / 'runs.jsonl'}" in r.err
    runs = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert len(runs) == 2
    for data in runs:
        assert data["outcome"] == "passed" and data["ended"]["answer"] == "Paid 7 USD to acme-ltd."
        assert data["user"] == [{"answer": "Which invoice, and to whom?", "reply": LATER}]
        assert data["user_tokens"]["in"] > 0 and data["tokens"]["in"] > 0
    # A file it could not write is refused before any run.
    r = agentd(
        "improve", "eval", "invoices", "--tasks", out, "--runs", "1", "--runs-out", tmp_path / "nowhere" / "runs.jsonl"
    )
    assert r.code == 1 and "cannot write the runs to" in r.err and "Traceback" not in r.err


def test_a_loop_budget_below_what_a_conversation_run_may_cost_is_refused_before_anything_is_spent(
    agentd, home: Home, tmp_path: Path
) -> None:
    agentd("init")
    conversation(home)  # the example's profile, and a conversation beside the example's sessions
    profile = load_profile(home, PROFILE)
    create_wallet(home, profile.wallet)
    record_sessions(home, profile.dir, lambda line: None, PROFILE)
    (tmp_path / "person.toml").write_text(PERSON_RULES)
    work = tmp_path / "work.json"
    harvest_profile(home, PROFILE, work, simulate=f"script:{tmp_path / 'person.toml'}")
    assert any(task.user is not None for task in load_tasks(work).tasks)
    seal_tasks(home, PROFILE, work, SealRequest(seed="test"), None)
    toml = home.profiles_dir / PROFILE / "profile.toml"
    toml.write_text(toml.read_text().replace("max_tokens = 20000", "max_tokens = 2000"))
    # One run of the agent may cost 2000 tokens, and its simulated user as many again.
    r = agentd("improve", "run", PROFILE, "--proposer", "script:models/proposer.toml", "--max-tokens", "3999")
    assert r.code == 2 and r.out == ""
    assert r.err == (
        "agentd: error: --max-tokens 3999 is less than one run may cost (the profile's limit of 2000 tokens a run, "
        "twice that for a task with a simulated user): give at least 4000\n"
    )
    assert not lineage_of(home, PROFILE).path.exists()


def test_the_examples_conversation_is_a_task_its_scripted_person_plays(agentd, home: Home, tmp_path: Path) -> None:
    agentd("init", "--example", "invoices")
    conversation = home.profiles_dir / "invoices" / "conversation.jsonl"
    assert agentd("sessions", "import", conversation, "--profile", "invoices").code == 0
    out, person = tmp_path / "talk.json", "script:models/person.toml"
    r = agentd("improve", "harvest", "invoices", "--out", out, "--simulate-users", person, "--json")
    assert r.code == 0 and json.loads(r.out)["kept"] == ["talk-1"], r.err
    (task,) = load_tasks(out).tasks
    assert task.to_json()["user"] == {"model": person, "said": ["Invoice 29, 6 USD, to hooli."]}
    # The example's own agent asks which invoice, is told, and pays it: the task passes.
    r = agentd("improve", "eval", "invoices", "--tasks", out, "--runs", "2", "--json")
    assert r.code == 0 and json.loads(r.out)["tasks"][0]["passed"] == 2, r.err
