"""Agreement with the authors' scorers: the same runs scored by agentd's checks and by
the benchmark's own code, side by side.

`variants` makes the runs: for each task, its solution and a few wrong (and a few
right-but-different) ways to answer it, the kinds a model gets wrong: a call left out
or made twice, an argument dropped, added, changed or of the wrong type, another
tool called, strings in other case and spacing, calls in another order. `bfcl_verdict`
is BFCL's own AST checker (and its irrelevance rule) on a run's calls.

The authors' code is imported only here, and only when asked: it is a measuring
instrument, never part of how agentd scores a run.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from improver.tasks.runs import Call, Run
from improver.tasks.task import Task


@dataclass(frozen=True)
class Variant:
    why: str
    run: Run


def variants(task: Task) -> Iterator[Variant]:
    """The task's solution, then runs that differ from it one way each."""
    gold = task.solution
    yield Variant("the solution", gold)
    calls = list(gold.calls)
    if not calls:
        for tool in task.tools[:2]:
            yield Variant(f"calls {tool['name']}", Run(calls=(_placeholder_call(tool),), answer="Done."))
        yield Variant("calls a tool with nothing", Run(calls=(Call(task.tools[0]["name"], {}),), answer="Done."))
        return
    yield Variant("calls nothing", Run(answer="I cannot."))
    if gold.answer:
        yield Variant("says nothing at the end", Run(calls=gold.calls, ended=gold.ended))
    yield Variant("makes the first call twice", _with(gold, [*calls, calls[0]]))
    yield Variant("in reverse order", _with(gold, calls[::-1]))
    # The call changed: the last one that changes something (what a database keeps), else the first.
    changing = {t["name"] for t in task.tools if t.get("changes")}
    at = max((i for i, c in enumerate(calls) if c.tool in changing), default=0)
    target = calls[at]
    arguments = target.arguments if isinstance(target.arguments, dict) else {}
    schema: dict[str, Any] = next((t["parameters"] for t in task.tools if t["name"] == target.tool), {})

    def instead(call: Call) -> Run:
        return _with(gold, [*calls[:at], call, *calls[at + 1 :]])

    yield Variant("leaves out a call", _with(gold, calls[:at] + calls[at + 1 :]))
    for name, value in arguments.items():
        for why, changed in _changes(value, schema.get("properties", {}).get(name, {})):
            yield Variant(f"{name} {why}", instead(Call(target.tool, {**arguments, name: changed})))
        yield Variant(
            f"leaves out {name}", instead(Call(target.tool, {k: v for k, v in arguments.items() if k != name}))
        )
    yield Variant("adds an argument", instead(Call(target.tool, {**arguments, "extra": 1})))
    for tool in task.tools:
        if tool["name"] != target.tool:
            yield Variant(f"calls {tool['name']} instead", instead(Call(tool["name"], arguments)))
            break


def _with(run: Run, calls: list[Call]) -> Run:
    return Run(calls=tuple(calls), answer=run.answer, ended=run.ended)


def _changes(value: Any, schema: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    if isinstance(value, bool):
        yield "flipped", not value
        yield "as text", str(value).lower()
    elif isinstance(value, int):
        yield "plus one", value + 1
        yield "as text", str(value)
        yield "as a float", float(value)
    elif isinstance(value, float):
        yield "plus a half", value + 0.5
        if value.is_integer():
            yield "as an integer", int(value)
    elif isinstance(value, str):
        yield "in capitals", value.upper()
        yield "with its spaces dropped", value.replace(" ", "")
        yield "changed", value + " and more"
        if schema.get("type") in ("integer", "number") or value.lstrip("-").isdigit():
            yield "as a number", int(value) if value.lstrip("-").isdigit() else 0
    elif isinstance(value, list):
        yield "with an item more", [*value, value[0] if value else "x"]
        yield "empty", []
        if len(value) > 1:
            yield "reversed", value[::-1]
    elif isinstance(value, dict):
        yield "with a key more", {**value, "extra": "x"}
        if value:
            first = next(iter(value))
            yield f"without {first}", {k: v for k, v in value.items() if k != first}


def _placeholder_call(tool: dict[str, Any]) -> Call:
    placeholders: dict[str, Any] = {"integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}
    properties = tool["parameters"].get("properties", {})
    required = tool["parameters"].get("required", [])
    return Call(tool["name"], {n: placeholders.get(properties.get(n, {}).get("type"), "x") for n in required})


# -- BFCL's own checker ----------------------------------------------------------------------

MODEL = "agentd"  # the model name BFCL's checker is told: tool names had their dots made underscores


def _bfcl_checker() -> Any:
    """BFCL's AST checker. Its module imports BFCL's model registry, which imports every
    vendor's SDK only to tell, per model, whether dots in tool names were written as
    underscores; without those SDKs the registry is given that one fact for `MODEL`."""
    try:
        from bfcl_eval.eval_checker.ast_eval import ast_checker
    except ModuleNotFoundError:
        registry = types.ModuleType("bfcl_eval.constants.model_config")
        registry.MODEL_CONFIG_MAPPING = {MODEL: types.SimpleNamespace(underscore_to_dot=True)}  # type: ignore[attr-defined]
        sys.modules["bfcl_eval.constants.model_config"] = registry
        from bfcl_eval.eval_checker.ast_eval import ast_checker
    return ast_checker


def bfcl_verdict(row: dict[str, Any], truth: list[Any] | None, category: str, calls: tuple[Call, ...]) -> bool:
    """Whether BFCL passes `calls` as the answer to its task `row` (its possible answer
    `truth`; None for an irrelevance set, where BFCL passes a run that calls nothing)."""
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.utils import is_empty_output

    output = [{c.tool: c.arguments} for c in calls]
    if "irrelevance" in category:
        return bool(is_empty_output(output))
    if any(not isinstance(c.arguments, dict) for c in calls):
        return False  # BFCL could not decode it as calls
    checker = _bfcl_checker()
    found = checker.ast_checker(row["function"], output, truth, Language.PYTHON, category, MODEL.replace("/", "_"))
    return bool(found["valid"])


# -- τ²'s own evaluation ---------------------------------------------------------------------


def tau2_verdict(domain: str, row: dict[str, Any], run: Run) -> bool:
    """Whether τ² gives `run` the full reward on its task `row`, by its default basis
    (the database, and the information communicated), with its own evaluators. The
    trajectory is what τ² records: each call and the answer τ²'s environment gives it,
    then the run's answer."""
    import importlib

    from loguru import logger

    logger.disable("tau2")  # τ² logs every tool answer at DEBUG
    from tau2.data_model.message import AssistantMessage, ToolCall, UserMessage
    from tau2.data_model.tasks import Task as Tau2Task
    from tau2.evaluator.evaluator_communicate import CommunicateEvaluator
    from tau2.evaluator.evaluator_env import EnvironmentEvaluator

    environment = importlib.import_module(f"tau2.domains.{domain}.environment")
    task = Tau2Task.model_validate(row)
    env = environment.get_environment()
    trajectory: list[Any] = [UserMessage(role="user", content="hello")]
    for i, call in enumerate(run.calls):
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        tool_call = ToolCall(id=f"call-{i}", name=call.tool, arguments=arguments)
        trajectory.append(AssistantMessage(role="assistant", tool_calls=[tool_call]))
        trajectory.append(env.get_response(tool_call))
    trajectory.append(AssistantMessage(role="assistant", content=run.answer or "."))
    database = EnvironmentEvaluator.calculate_reward(environment.get_environment, task, trajectory).reward
    told = CommunicateEvaluator.calculate_reward(task, trajectory).reward
    return bool(database * told == 1.0)
