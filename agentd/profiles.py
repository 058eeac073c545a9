"""Profiles: the operator's words, the models, the tools, and what the agent has learned.

`profiles/NAME/profile.toml` is the operator's and is never rewritten by agentd.
`profiles/NAME/learned.json` beside it is the loop's: the lessons and, when the loop
changed them, the models. Only the loop, `adopt` and `undo` write it.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from agentd.errors import AgentdError, NotFound, WrongValue, did_you_mean
from agentd.home import Home, load_toml
from improver import MATCHES, Case, EpisodeLimits, ImproverError, Rubric, parse_rubric, write_atomic

NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


@dataclass(frozen=True)
class ToolSpec:
    """One tool the agent may call, and how to run it."""

    name: str
    description: str
    parameters: dict[str, Any]
    changes: bool
    match: str = "input"  # "name": a check only asks that the tool is called, not with what
    run: str | None = None  # a Python callable, "module:function"
    command: tuple[str, ...] | None = None  # a program reading JSON on stdin
    timeout: float = 60.0

    def schema(self) -> dict[str, Any]:
        """The tool as a model is shown it (OpenAI function format)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def info(self) -> dict[str, Any]:
        """What a task keeps of the tool: its schema and how checks treat it."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "changes": self.changes,
            "match": self.match,
        }


@dataclass(frozen=True)
class Learned:
    """What the loop keeps for a profile; `models` is None until the loop changes them."""

    lessons: str = ""
    models: list[str] | None = None
    step: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Profile:
    name: str
    dir: Path
    operator: str
    models: list[str]
    tools: list[ToolSpec]
    wallet: str
    confidential: bool = False
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)
    learned: Learned = field(default_factory=Learned)
    rubric: Rubric | None = None  # [rubric]: its tasks' gates and weights (improver.tasks.rubric)

    @property
    def toml_path(self) -> Path:
        return self.dir / "profile.toml"

    @property
    def learned_path(self) -> Path:
        return self.dir / "learned.json"

    @property
    def run_models(self) -> list[str]:
        """The models the agent runs on now: the loop's choice when it made one."""
        return list(self.learned.models or self.models)

    def tool(self, name: str) -> ToolSpec | None:
        return next((t for t in self.tools if t.name == name), None)

    def case(self, task: str, name: str = "live") -> Case:
        return Case(
            name=name,
            task=task,
            tools=[t.schema() for t in self.tools],
            operator=self.operator,
            lessons=self.learned.lessons,
            limits=self.limits,
        )


def profile_dir(home: Home, name: str) -> Path:
    return home.profiles_dir / name


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name):
        raise WrongValue(f"{name!r} is not a valid profile name: use lower-case letters, digits, '-' and '_'")
    return name


def load_profile(home: Home, name: str) -> Profile:
    check_name(name)
    folder = profile_dir(home, name)
    path = folder / "profile.toml"
    if not path.exists():
        raise NotFound(
            f"no profile named {name!r} in {home.profiles_dir}; {_nearest(home, name)}", f"no profile named {name!r}"
        )
    data = load_toml(path)
    return _parse(name, folder, path, data)


def _nearest(home: Home, name: str) -> str:
    """What to do about a profile that is not there: the nearest name when one is close
    (a typo), else the profiles there are, and how to make it."""
    known = list_profiles(home)
    there = f"its profiles are {', '.join(known)}; or " if known else ""
    return did_you_mean(name, known) or f"{there}create it with: agentd profile new {name}"


def require_profile(home: Home, name: str) -> None:
    """Raises load_profile's error for a profile that is not there, without parsing one that is."""
    if not (profile_dir(home, name) / "profile.toml").is_file():
        load_profile(home, name)


def list_profiles(home: Home) -> list[str]:
    if not home.profiles_dir.is_dir():
        return []
    return sorted(p.name for p in home.profiles_dir.iterdir() if (p / "profile.toml").is_file())


def _parse(name: str, folder: Path, path: Path, data: dict[str, Any]) -> Profile:
    where = str(path)
    operator = _get(data, "operator", str, where)
    models = _get(data, "models", list, where)
    if not models or not all(isinstance(m, str) and ":" in m for m in models):
        raise AgentdError(f"{where}: 'models' must list at least one model as \"provider:model\"")
    limits = _limits(_get(data, "limits", dict, where, default={}), where)
    tools = [_tool(t, i, where) for i, t in enumerate(_get(data, "tools", list, where, default=[]))]
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise AgentdError(f"{where}: two tools share a name; each tool needs its own")
    return Profile(
        name=name,
        dir=folder,
        operator=operator,
        models=models,
        tools=tools,
        wallet=_get(data, "wallet", str, where, default=name),
        confidential=_get(data, "confidential", bool, where, default=False),
        limits=limits,
        learned=load_learned(folder / "learned.json"),
        rubric=_rubric(data, names, where),
    )


def _rubric(data: dict[str, Any], tools: list[str], where: str) -> Rubric | None:
    if "rubric" not in data:
        return None
    try:
        return parse_rubric(data["rubric"], tools)
    except ImproverError as exc:
        raise AgentdError(f"{where}: [rubric]: {exc}") from None


def _limits(data: dict[str, Any], where: str) -> EpisodeLimits:
    """Each limit a positive number, a whole one for turns, tokens and bytes: checked here,
    since a wrong one would only show as a crash in the middle of a run."""
    defaults = {f.name: f.default for f in fields(EpisodeLimits)}
    for key, value in data.items():
        if key not in defaults:
            raise AgentdError(f"{where}: [limits] knows only {', '.join(defaults)}, not {key!r}")
        whole = isinstance(defaults[key], int)
        number = isinstance(value, int if whole else (int, float)) and not isinstance(value, bool)
        if not number or value <= 0 or (isinstance(value, float) and not math.isfinite(value)):
            what = "a whole number above 0" if whole else "a number above 0"
            raise AgentdError(f"{where}: [limits] {key} must be {what}, not {value!r}")
    return EpisodeLimits(**data)


def _tool(data: Any, index: int, where: str) -> ToolSpec:
    at = f"{where}: tools[{index}]"
    if not isinstance(data, dict):
        raise AgentdError(f"{at} must be a table ([[tools]])")
    name = _get(data, "name", str, at)
    at = f"{where}: tool {name!r}"
    run = _get(data, "run", str, at, default=None)
    command = _get(data, "command", list, at, default=None)
    if (run is None) == (command is None):
        raise AgentdError(f'{at} needs exactly one of run = "module:function" or command = [...]')
    if command is not None and (not command or not all(isinstance(c, str) and c for c in command)):
        raise AgentdError(
            f'{at}: command must list the program and its arguments, as non-empty strings, like ["python3", "tool.py"]'
        )
    if run is not None and not re.match(r"^[\w.]+:\w+$", run):
        raise AgentdError(f'{at}: run = {run!r} is not "module:function"')
    match = _get(data, "match", str, at, default="input")
    if match not in MATCHES:
        raise AgentdError(f"{at}: match must be one of {', '.join(MATCHES)}")
    return ToolSpec(
        name=name,
        description=_get(data, "description", str, at, default=""),
        parameters=_get(data, "parameters", dict, at, default={"type": "object", "properties": {}}),
        changes=_get(data, "changes", bool, at),
        match=match,
        run=run,
        command=tuple(command) if command is not None else None,
        timeout=float(_get(data, "timeout", (int, float), at, default=60.0)),
    )


def _get(data: dict[str, Any], key: str, kind: Any, where: str, **kw: Any) -> Any:
    if key not in data:
        if "default" in kw:
            return kw["default"]
        raise AgentdError(f"{where}: missing {key!r}")
    value = data[key]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else "number"
        raise AgentdError(f"{where}: {key!r} must be a {names}")
    return value


def load_learned(path: Path) -> Learned:
    if not path.exists():
        return Learned()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        models = data.get("models")
        if models is not None and (
            not isinstance(models, list) or not all(isinstance(m, str) and ":" in m for m in models)
        ):
            raise ValueError('"models" must list models as "provider:model"')
        return Learned(
            lessons=str(data.get("lessons") or ""), models=list(models) if models else None, step=data.get("step")
        )
    except (ValueError, AttributeError, TypeError, RecursionError) as exc:
        # ValueError covers text that is not JSON and bytes that are not UTF-8.
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise AgentdError(f"{path}: not a valid learned.json ({why}); restore it or delete it") from None
    except OSError as exc:
        raise AgentdError(f"cannot read {path}: {exc.strerror}") from None


def save_learned(profile: Profile, learned: Learned) -> None:
    write_atomic(profile.learned_path, json.dumps(learned.to_json(), indent=2, ensure_ascii=False) + "\n")


PROFILE_TEMPLATE = '''# The operator's words: what the agent is told, first in its prompt.
# agentd never rewrites this file; what the agent learns goes to learned.json.
operator = """
{operator}
"""

# The models the agent may run on, as "provider:model"; the first is the default.
# Providers: openai:MODEL, anthropic:MODEL, script:PATH (a rules file).
models = [{models}]

# The wallet that signs this profile's entries on the ledger.
wallet = "{wallet}"

# A confidential profile's sessions are never exported for training.
confidential = false

[limits]
max_turns = 20
max_tokens = 100000
# wall_seconds = 300   # a session's time; a live session counts the model's time in it
# call_tokens = 4096   # the longest answer one model call may be asked for
# call_seconds = 300   # one model call's deadline: one that takes longer is cut off, and the session errors

# Tools: each has a JSON schema for its input, says whether it changes something, and
# runs either a Python callable (run = "module:function", called with the arguments and
# this folder; a module.py in this folder is found first) or a command reading the JSON
# input on stdin and printing its answer.
#
# [[tools]]
# name = "read_invoice"
# description = "Reads an invoice by its number."
# changes = false
# run = "tools:read_invoice"
# [tools.parameters]
# type = "object"
# properties = {{ number = {{ type = "string" }} }}
# required = ["number"]
'''


def new_profile(home: Home, name: str, operator: str, models: list[str], wallet: str | None) -> Path:
    check_name(name)
    folder = profile_dir(home, name)
    if (folder / "profile.toml").exists():
        raise AgentdError(f"profile {name!r} already exists at {folder}")
    text = PROFILE_TEMPLATE.format(
        operator=operator.replace('"""', "'''"),
        models=", ".join(json.dumps(m) for m in models),
        wallet=wallet or name,
    )
    write_atomic(folder / "profile.toml", text)
    return folder
