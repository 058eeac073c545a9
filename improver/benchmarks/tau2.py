"""τ²-bench domains as agentd tasks.

Each domain ships in `tau2/data/tau2/domains/NAME/`: `tasks.json` (each with a user
scenario and evaluation criteria), `split_tasks.json` (train and test ids), the
database and the policy. A task becomes:

- a task whose tools its domain's own code answers over its database, in the sandbox
  (`world`, improver.tasks.worlds; the tools are the domain's, a writing tool is one
  that `changes`);
- the ask: the scenario's reason for calling and what the customer knows. With a
  simulated user's model (`user_model`), only the reason is asked, and the model plays
  the customer, holding what it knows and how it behaves (improver.tasks.simuser);
- checks as τ² scores by default (its DB and COMMUNICATE rewards): `ends_in` the state
  the task's own actions leave the database in, and `says` each piece of information the
  agent must communicate;
- the solution: the task's actions, in order, then an answer giving that information;
  the failure: a run that does nothing;
- its split (`source.split`: train or test), so the test split can be sealed.

The policy is what the agent is told before any task: it is the profile's operator
words, written beside the tasks. τ²'s natural-language assertions (judged by a model,
and outside its default reward), tasks that start from a state of their own, and the
telecom domain (the user has tools and a device of their own) are not imported yet.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from improver.base.errors import ImproverError
from improver.benchmarks.packages import Imported, Skipped, package_dir, version_of
from improver.benchmarks.tau2world import DOMAINS
from improver.tasks.runs import Call, Run
from improver.tasks.simuser import SimulatedUser
from improver.tasks.task import Task
from improver.tasks.worlds import World, WorldPool
from sandbox import Runner

PACKAGE = "tau2"
NOT_YET = {"telecom": "its customer has tools and a device of their own, which agentd's simulated user cannot use yet"}


def domain_problem(domain: str) -> str | None:
    """Why `domain` is no domain this import takes (with those it takes), or None."""
    if domain in DOMAINS:
        return None
    why = f" ({NOT_YET[domain]})" if domain in NOT_YET else ""
    return f"no τ² domain {domain!r} is imported{why}; the domains are {', '.join(DOMAINS)}"


def domain_dir(domain: str) -> Path:
    wrong = domain_problem(domain)
    if wrong:
        raise ImproverError(wrong)
    return package_dir(PACKAGE) / "data" / "tau2" / "domains" / domain


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImproverError(f"cannot read {path}: {exc}") from None


async def import_domain(
    domain: str, profile: str, runner: Runner | None = None, user_model: str | None = None, limit: int | None = None
) -> tuple[Imported, str]:
    """The domain's tasks (each run through its world once, for the state its actions
    leave) and its policy."""
    folder = domain_dir(domain)
    rows = _read(folder / "tasks.json")
    if not isinstance(rows, list):
        raise ImproverError(f"{folder / 'tasks.json'}: not a list of tasks")
    splits = _read(folder / "split_tasks.json") if (folder / "split_tasks.json").exists() else {}
    split_of = {str(i): name for name in ("train", "test") for i in splits.get(name, [])}
    pool = WorldPool(runner)
    world = await pool.take({"kind": "tau2", "domain": domain})
    try:
        described = await world.describe()
        tools = [_tool(t) for t in described["tools"]]
        imported = Imported()
        source = {"benchmark": "tau2", "domain": domain, "package": version_of(PACKAGE)}
        for number, row in enumerate(rows[:limit], 1):
            where = str(row.get("id", f"tasks.json #{number}")) if isinstance(row, dict) else f"tasks.json #{number}"
            try:
                task = await _task(row, world, tools, {**source, "split": split_of.get(where)}, profile, user_model)
            except _Unfit as exc:
                imported.skipped.append(Skipped(where, str(exc)))
                continue
            imported.tasks.append(task)
    finally:
        await pool.discard(world)
    return imported, str(described["policy"])


class _Unfit(Exception):
    """A task this import cannot make; the message says why."""


def _tool(schema: dict[str, Any]) -> dict[str, Any]:
    function = schema["function"]
    return {
        "name": function["name"],
        "description": function.get("description", ""),
        "parameters": function.get("parameters", {"type": "object", "properties": {}}),
        "changes": bool(schema.get("writes")),
        "match": "input",
    }


async def _task(
    row: Any, world: World, tools: list[dict[str, Any]], source: dict[str, Any], profile: str, user_model: str | None
) -> Task:
    if not isinstance(row, dict) or not isinstance(row.get("id"), str):
        raise _Unfit("not a task with an id")
    if row.get("initial_state"):
        raise _Unfit("it starts from a state of its own (initial_state), which is not imported yet")
    criteria = row.get("evaluation_criteria") or {}
    basis = criteria.get("reward_basis") or ["DB", "COMMUNICATE"]
    if set(basis) - {"DB", "COMMUNICATE"}:
        raise _Unfit(f"it is scored on {', '.join(basis)}; DB and COMMUNICATE are imported")
    actions = criteria.get("actions") or []
    if any(a.get("requestor", "assistant") != "assistant" for a in actions):
        raise _Unfit("the customer takes some of its actions, which is not imported yet")
    calls = tuple(Call(a["name"], a.get("arguments") or {}) for a in actions)
    await world.reset()
    for call in calls:
        await world.answer(call.tool, call.arguments)
    state = await world.state()
    said = [str(i) for i in criteria.get("communicate_info") or []]
    ask, user = _ask(row.get("user_scenario") or {}, user_model)
    return Task(
        name=f"tau2-{source['domain']}-{row['id']}",
        profile=profile,
        task=ask,
        tools=tools,
        standins=[],
        checks=[{"check": "ends_in", "state": state}, *({"check": "says", "text": s} for s in said)],
        source={**source, "id": row["id"]},
        solution=Run(calls=calls, answer=" ".join(said) or "Done."),
        failures=(Run(why="a run that does nothing"),),
        user=user,
        world={"kind": "tau2", "domain": source["domain"]},
    )


def _ask(scenario: dict[str, Any], user_model: str | None) -> tuple[str, SimulatedUser | None]:
    instructions = scenario.get("instructions")
    if isinstance(instructions, str):
        instructions = {"reason_for_call": instructions}
    if not isinstance(instructions, dict) or not instructions.get("reason_for_call"):
        raise _Unfit("its user scenario gives no reason for the call")
    reason = str(instructions["reason_for_call"])
    known = str(instructions.get("known_info") or "")
    heading = 'A customer\'s request ("you" is the customer): '
    if user_model is None:
        return heading + " ".join(filter(None, [reason, known])), None
    said = tuple(filter(None, [known, str(instructions.get("task_instructions") or "")]))
    if not said:
        return heading + reason, None
    return heading + reason, SimulatedUser(user_model, said)
