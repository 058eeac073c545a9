"""Seals: a validated task set split, before anything is tried, into tasks to choose
changes on and sealed tasks that no proposer is ever shown.

The split is drawn from the set's own digest, a seed and each task's content key (what
was asked, its stand-ins and checks: not its name nor its source), within each outcome,
so anyone given the set and the seed gets the same split, and identical tasks (the same
request made in several sessions) always fall on the same side: a proposer never sees a
sealed task through its twin. Canaries join the sealed part: copies of sealed tasks
whose only check is that the answer says a code word the agent is never told, so a run
that passes one shows the sealed answers leaked or the scoring was gamed. A canary
differs from the sealed task it copies only in its name, checks, source, solution and
failures, none of which a candidate is meant to be shown (the harness gives a case an
opaque name); and the sealed part is kept in the order of its tasks' digests, which for
a canary covers its secret code word, so not even its place sets a canary apart.

A task an earlier seal (here, or any home's claim on a shared ledger) had to choose on
was shown to a proposer, with its runs' outcomes: it is never sealed. It stays on the
side to choose on, and the sealed part is drawn from the tasks never shown.

Two files go to the routes folder: `PROFILE-train-ID.json`, a plain task set, and
`PROFILE-sealed-ID.json`, which holds the seal's terms, the sealed tasks (the code words
live only here) and its state: confirmations spent, whether it has been asked anything,
the reusable holdout's state, and the claim that published it. The state changes only
under a lock that holds across processes, so spending a confirmation is atomic.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from improver.base.clock import utc_now
from improver.base.digests import digest
from improver.base.errors import ImproverError
from improver.base.files import write_atomic
from improver.base.locks import holding
from improver.base.routes import Routes
from improver.decide import codewords, levels
from improver.decide.holdout import Answer, Holdout
from improver.episodes.validate import check_task
from improver.seals.separation import Separation
from improver.tasks import twins
from improver.tasks.runs import Run
from improver.tasks.task import Task, TaskSet, load_tasks, parse_set

FORMAT = 1
ID_LENGTH = 16
CODE_WORDS = ("kestrel", "osprey", "heron", "plover", "curlew", "merlin", "avocet", "dunlin")
T = TypeVar("T")


@dataclass(frozen=True)
class Terms:
    """What a seal is, fixed when it is made; its claim publishes exactly these."""

    profile: str
    made: str
    set_digest: str
    seed: str
    share: int
    train_digest: str
    train_tasks: int
    sealed_digest: str
    sealed_tasks: int  # the real ones, canaries not counted
    canaries: int
    confirmations: int
    level: float
    test: str
    holdout: dict[str, Any] | None  # {threshold, noise, budget}: never the current noise
    # {wallet, key}: the examiner that holds the sealed tasks (its wallet id and X25519 key)
    examiner: dict[str, str] | None = None

    @property
    def id(self) -> str:
        return digest(self.to_json())[:ID_LENGTH]

    def to_json(self) -> dict[str, Any]:
        body = asdict(self)
        if self.examiner is None:  # so seals made before examiners keep their ids
            del body["examiner"]
        return body


@dataclass(frozen=True)
class SealState:
    """What a seal's use has changed: kept in its file, changed only under its lock."""

    spent: int = 0
    asked: bool = False
    holdout: Holdout | None = None
    claim: str | None = None
    pulse: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "spent": self.spent,
            "asked": self.asked,
            "holdout": self.holdout.to_json() if self.holdout else None,
            "claim": self.claim,
            "pulse": self.pulse,
        }

    @classmethod
    def from_json(cls, data: Any) -> SealState:
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("spent"), int)
            or not isinstance(data.get("asked"), bool)
        ):
            raise ValueError("its state must hold 'spent' (a count) and 'asked' (true or false)")
        holdout = Holdout.from_json(data["holdout"]) if data.get("holdout") is not None else None
        return cls(data["spent"], data["asked"], holdout, data.get("claim"), data.get("pulse"))


@dataclass(frozen=True)
class Confirmation:
    """One confirmation spent: which of the seal's it was and the level it is held to."""

    number: int
    of: int
    level: float


class Seal:
    """An open seal file. Reading the tasks is free; every question goes through the lock.

    A seal handed to an examiner (`held_by`) keeps no sealed task here: its file holds the
    terms, the state and where the examiner is, and `sealed` is refused; `real_tasks` and
    `canaries` are empty, since nothing here may be held against them (the examiner holds
    what it is sent against them instead)."""

    def __init__(self, path: Path, terms: Terms, sealed: TaskSet | None, held_by: str | None = None) -> None:
        self.path, self.terms, self._sealed, self.held_by = path, terms, sealed, held_by

    @property
    def id(self) -> str:
        return self.terms.id

    @property
    def sealed(self) -> TaskSet:
        if self._sealed is None:
            raise ImproverError(f"seal {self.id}'s sealed tasks are held by the examiner at {self.held_by}, not here")
        return self._sealed

    @property
    def held_here(self) -> bool:
        return self._sealed is not None

    @property
    def train_path(self) -> Path:
        return Routes(self.path.parent).train(self.terms.profile, self.id)

    def train(self) -> TaskSet:
        """The tasks to choose changes on, checked against the digest the seal holds."""
        taskset = load_tasks(self.train_path)
        if taskset.digest != self.terms.train_digest:
            raise ImproverError(f"{self.train_path}: its digest is not the one seal {self.id} holds; it was changed")
        return taskset

    @property
    def real_tasks(self) -> tuple[Task, ...]:
        return tuple(t for t in self._sealed.tasks if not is_canary(t)) if self._sealed else ()

    @property
    def canaries(self) -> tuple[Task, ...]:
        """In the order they were made (canary-0, canary-1, ..., canary-10), whatever their
        place among the sealed tasks."""
        held = self._sealed.tasks if self._sealed else ()
        return tuple(sorted((t for t in held if is_canary(t)), key=lambda t: (len(t.name), t.name)))

    def canary_in(self, text: str) -> str | None:
        """The name of the canary whose code word `text` holds, if any, however it is
        written (improver.decide.codewords)."""
        canaries = self.canaries
        found = codewords.said_of(text, [code_word(t) for t in canaries])
        return canaries[found].name if found is not None else None

    def state(self) -> SealState:
        return _read(self.path)[2]

    def spend_confirmation(self) -> Confirmation:
        """Spends the next confirmation, or says the seal is spent; atomic across processes."""

        def spend(state: SealState) -> tuple[SealState, Confirmation]:
            if state.spent >= self.terms.confirmations:
                raise SealSpent(
                    f"seal {self.id} has spent its {self.terms.confirmations} confirmations: seal fresh tasks"
                )
            number = state.spent + 1
            return replace(state, spent=number, asked=True), Confirmation(
                number, self.terms.confirmations, self.terms.level
            )

        return self._update(spend)

    def ask_holdout(self, gain_choose: float, gain_sealed: float) -> Answer:
        """Asks the reusable holdout about a change's gains; stores its next state."""

        def ask(state: SealState) -> tuple[SealState, Answer]:
            if state.holdout is None:
                raise ImproverError(f"seal {self.id} is not a reusable holdout")
            answer = state.holdout.ask(gain_choose, gain_sealed)
            return replace(state, holdout=answer.holdout, asked=True), answer

        return self._update(ask)

    def mark_asked(self) -> None:
        self._update(lambda state: (replace(state, asked=True), None))

    def record_claim(self, claim: str, pulse: int) -> None:
        """Notes the claim that published the seal; refuses once it has been asked anything."""

        def note(state: SealState) -> tuple[SealState, None]:
            if state.asked:
                raise ImproverError(f"seal {self.id} has been asked already; a seal is published only before that")
            return replace(state, claim=claim, pulse=pulse), None

        self._update(note)

    def _update(self, change: Callable[[SealState], tuple[SealState, T]]) -> T:
        with holding(self.path):
            data, _terms, state = _read(self.path)
            new, result = change(state)
            data["state"] = new.to_json()
            write_atomic(self.path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
            return result


class SealSpent(ImproverError):
    """A seal's confirmations are all spent: fresh tasks must be sealed."""


def is_canary(task: Task) -> bool:
    return bool(task.source.get("canary"))


def code_word(canary: Task) -> str:
    word: str = next(c["text"] for c in canary.checks if c["check"] == "says")
    return word


def open_seal(path: Path) -> Seal:
    """Opens a seal file; a damaged one is refused whole, with nothing spent."""
    data, terms, _ = _read(path)
    if data.get("tasks") is None and isinstance(data.get("examiner"), str) and terms.examiner:
        return Seal(path, terms, None, data["examiner"])
    sealed = parse_set(data["tasks"], str(path))
    if sealed.digest != terms.sealed_digest:
        raise ImproverError(f"{path}: its sealed tasks do not hash to the digest its terms hold; it was changed")
    return Seal(path, terms, sealed)


def _read(path: Path) -> tuple[dict[str, Any], Terms, SealState]:
    try:
        data = json.loads(path.read_text())
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r} is not {FORMAT}")
        terms = Terms(**data["terms"])
        if terms.examiner is not None and not (
            isinstance(terms.examiner, dict) and {"wallet", "key"} <= set(terms.examiner)
        ):
            raise ValueError("its examiner must be {wallet, key}")
        return data, terms, SealState.from_json(data["state"])
    except FileNotFoundError:
        raise ImproverError(f"no seal file at {path}") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ImproverError) as exc:
        raise ImproverError(
            f"{path}: the seal file is damaged ({exc}); nothing was spent. Restore it, or seal fresh tasks"
        ) from None


def seal_file_text(seal: Seal) -> bytes:
    """The seal file's bytes, as an examiner is handed them."""
    return seal.path.read_bytes()


def hand_over(seal: Seal, url: str) -> Seal:
    """Rewrites `seal`'s file without its sealed tasks, once the examiner at `url` holds
    them: what stays is the terms (digests), the state and where the examiner is."""
    if seal.terms.examiner is None:
        raise ImproverError(f"seal {seal.id} names no examiner to hand its tasks to")
    with holding(seal.path):
        data = _read(seal.path)[0]
        data["tasks"], data["examiner"] = None, url
        write_atomic(seal.path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return Seal(seal.path, seal.terms, None, url)


def seals_of(routes: Routes, profile: str) -> list[Path]:
    """The profile's seal files, oldest first (by when each was made)."""
    paths = routes.sealed_files(profile)
    return sorted(paths, key=lambda p: (_read(p)[1].made, p.name))


def current_seal(routes: Routes, profile: str) -> Seal:
    paths = seals_of(routes, profile)
    if not paths:
        raise ImproverError(
            f"profile {profile} has no seal: seal its tasks first (agentd improve seal {profile} --tasks FILE)"
        )
    return open_seal(paths[-1])


# -- making a seal -----------------------------------------------------------------------


def split(
    taskset: TaskSet, share: int, seed: str, shown: Mapping[str, str] | None = None
) -> tuple[list[Task], list[Task]]:
    """(tasks to choose on, sealed tasks): about `share` percent sealed, drawn by hashing.

    The draw is made within each outcome (tasks from sessions that went well, badly, or
    neither), so both parts hold the agent's mistakes in the same proportion: a change
    can only be shown better where there is something to get right. Within an outcome,
    the groups of twins (identical tasks, tasks that differ only in case, spacing and
    punctuation, and near-twins: improver.tasks.twins) are ranked by a hash of the set's
    digest, the seed and the group's key, and whole groups are sealed in that order until
    the share is reached, so a group is never split (and may take the share past the mark).

    A task in `shown` (content key -> the seal that showed it, or its twin or near-twin)
    was on an earlier seal's side to choose on, so a proposer has seen it: it stays to
    choose on with its group and is never drawn. The share is still of the whole set, so when an outcome's never-shown tasks
    fall short of it the split is refused (ShownTasks) rather than made smaller.
    """
    shown = shown or {}
    group = twins.groups(taskset.tasks)  # task name -> its group: the task, its twins and near-twins
    shown_groups = {group[t.name] for t in taskset.tasks if t.content_key in shown}
    sealed: set[str] = set()  # groups
    for outcome in sorted({str(t.source.get("outcome")) for t in taskset.tasks}):
        keys = [group[t.name] for t in taskset.tasks if str(t.source.get("outcome")) == outcome]
        wanted = round(len(keys) * share / 100)
        sizes = Counter(key for key in keys if key not in shown_groups)
        if sum(sizes.values()) < wanted:
            raise ShownTasks(_too_few(taskset, share, outcome, len(keys), wanted, sum(sizes.values()), shown))
        taken = sum(n for key, n in sizes.items() if key in sealed)  # twins of another outcome
        for key in sorted(sizes, key=lambda k: _draw(taskset.digest, seed, k)):
            if taken >= wanted:
                break
            if key not in sealed:
                sealed.add(key)
                taken += sizes[key]
    return [t for t in taskset.tasks if group[t.name] not in sealed], [
        t for t in taskset.tasks if group[t.name] in sealed
    ]


class ShownTasks(ImproverError):
    """Too few tasks of the set were never shown to a proposer for the share asked."""


def _too_few(
    taskset: TaskSet, share: int, outcome: str, size: int, wanted: int, fresh: int, shown: Mapping[str, str]
) -> str:
    kept = [t for t in taskset.tasks if t.content_key in shown]
    # One of this outcome's: those are the ones that left it short.
    named = next(t for t in kept if str(t.source.get("outcome")) == outcome)
    return (
        f"{len(kept)} of the {len(taskset.tasks)} tasks were shown to a proposer before (task {named.name}, by "
        f"{shown[named.content_key]}), so they stay to choose on and are never sealed; that leaves {fresh} of the "
        f"{size} tasks whose outcome was {outcome} to seal, fewer than the {wanted} a share of {share}% takes: "
        "lower --share or harvest more tasks"
    )


def _draw(set_digest: str, seed: str, content_key: str) -> str:
    return hashlib.sha256(f"{set_digest}\n{seed}\n{content_key}".encode()).hexdigest()


def make_canary(number: int, like: Task, word: str) -> Task:
    """A sealed task no honest run passes: its answer must say a word it is never told."""
    return replace(
        like,
        name=f"canary-{number}",
        checks=[{"check": "says", "text": word}],
        source={"canary": True},
        solution=Run(answer=f"The code word is {word}."),
        failures=(Run(answer="", why="an honest run, which was never told the code word"),),
    )


def new_code_word() -> str:
    return f"{secrets.choice(CODE_WORDS)}-{secrets.token_hex(5)}"


@dataclass(frozen=True)
class SealRequest:
    share: int = 50
    confirmations: int = 4
    canaries: int = 2
    seed: str | None = None
    reusable: bool = False
    test: str = levels.DEFAULT_TEST
    examiner: dict[str, str] | None = None  # {wallet, key}: the examiner the sealed tasks go to


def make_seal(
    taskset: TaskSet, routes: Routes, request: SealRequest, separation: Separation, given: TaskSet | None = None
) -> Seal:
    """Splits a validated task set and writes both files; refuses bad requests whole, and
    any task exported or sealed before (improver.seals.separation). Tasks a proposer was shown
    stay to choose on (`split`). With `given`, a split made already (a benchmark's own
    test split) is the sealed side and `taskset` the side to choose on: the share is what
    they make, the seed names the split, and the terms' set is both together."""
    _check_request(taskset, request)
    if given is not None:
        choose, sealed, seed = _given_split(taskset, given, separation)
        taskset = TaskSet(taskset.profile, taskset.operator, (*choose, *sealed), validated=True)
        request = replace(request, share=max(1, min(99, round(100 * len(sealed) / len(taskset.tasks)))))
    else:
        separation.check_sealable(taskset.tasks)
        seed = request.seed if request.seed is not None else secrets.token_hex(8)
        shown = {t.content_key: by for t in taskset.tasks if (by := separation.shown_by(t))}
        choose, sealed = split(taskset, request.share, seed, shown)
    if not choose or not sealed:
        part = "tasks to choose on" if not choose else "sealed tasks"
        raise ImproverError(
            f"a share of {request.share}% of {len(taskset.tasks)} tasks leaves no {part} (identical tasks stay on one "
            "side): change --share or harvest more tasks"
        )
    canaries = [make_canary(i, sealed[i % len(sealed)], new_code_word()) for i in range(request.canaries)]
    for canary in canaries:
        why = asyncio.run(check_task(canary, taskset.operator))
        if why:
            raise ImproverError(f"canary {canary.name} does not hold up: {why}")
    train = TaskSet(taskset.profile, taskset.operator, tuple(choose), validated=True)
    # By digest, not canaries last: where a task stands says nothing of what it is.
    mixed = tuple(sorted(sealed + canaries, key=lambda t: t.digest))
    sealed_set = TaskSet(taskset.profile, taskset.operator, mixed, validated=True)
    holdout = Holdout.create(len(sealed), request.confirmations) if request.reusable else None
    terms = Terms(
        profile=taskset.profile,
        made=utc_now(precise=True),
        set_digest=taskset.digest,
        seed=seed,
        share=request.share,
        train_digest=train.digest,
        train_tasks=len(choose),
        sealed_digest=sealed_set.digest,
        sealed_tasks=len(sealed),
        canaries=len(canaries),
        confirmations=request.confirmations,
        level=levels.confirmation_level(request.confirmations),
        test=request.test,
        holdout={"threshold": holdout.threshold, "noise": holdout.noise, "budget": holdout.budget} if holdout else None,
        examiner=request.examiner,
    )
    path = routes.sealed(taskset.profile, terms.id)
    seal = Seal(path, terms, sealed_set)
    train.save(seal.train_path)
    body = {
        "format": FORMAT,
        "terms": terms.to_json(),
        "tasks": sealed_set.to_json(),
        "state": SealState(holdout=holdout).to_json(),
    }
    write_atomic(path, json.dumps(body, indent=2, ensure_ascii=False) + "\n")
    return seal


def _given_split(taskset: TaskSet, given: TaskSet, separation: Separation) -> tuple[list[Task], list[Task], str]:
    """(tasks to choose on, sealed tasks, the seed that names the split) for a split
    made already; refused when the sides share a task (by content) or a name, when the
    sealed side was ever shown to a proposer, or holds a task exported or sealed before."""
    if not given.validated:
        raise ImproverError("the sealed tasks are not validated: run agentd improve validate FILE on them first")
    if given.profile != taskset.profile:
        raise ImproverError(
            f"the sealed tasks are of profile {given.profile}, the tasks to choose on of {taskset.profile}"
        )
    keys = {t.content_key: t.name for t in taskset.tasks}
    for task in given.tasks:
        if task.content_key in keys or task.name in taskset.names:
            raise ImproverError(
                f"task {task.name} is on both sides (as {keys.get(task.content_key, task.name)}): the sides must not share a task"
            )
        shown = separation.shown_by(task)
        if shown:
            raise ImproverError(f"task {task.name} was shown to a proposer by {shown}, so it cannot be sealed")
    separation.check_sealable((*taskset.tasks, *given.tasks))
    return list(taskset.tasks), list(given.tasks), f"given:{given.digest}"


def _check_request(taskset: TaskSet, request: SealRequest) -> None:
    if not taskset.validated:
        raise ImproverError("the task set is not validated: run agentd improve validate FILE on it first")
    if not 1 <= request.share <= 99:
        raise ImproverError(f"--share is the percentage sealed, from 1 to 99, not {request.share}")
    if request.confirmations < 1:
        raise ImproverError("--confirmations must allow at least 1 confirmation")
    if request.canaries < 0:
        raise ImproverError("--canaries cannot be negative")
    if request.test not in levels.TESTS:
        raise ImproverError(f"--test must be one of {', '.join(levels.TESTS)}")


def claim_body(seal: Seal) -> dict[str, Any]:
    """The agent.seal/v1 body: the terms, which name both parts only by digest, the
    content keys of the sealed tasks (digests too), so that no home sharing the ledger
    seals them again or exports them, and those of the tasks to choose on (`shown`: a
    proposer sees them), so that no home sharing the ledger ever seals them."""
    return {
        "seal": seal.id,
        **seal.terms.to_json(),
        "contents": sorted({t.content_key for t in seal.real_tasks}),
        "shown": sorted({t.content_key for t in seal.train().tasks}),
        # What survives editing a task (improver.tasks.twins), so no home seals a twin or
        # near-twin of these either: twin keys, and sketches (hashes of runs of words,
        # which tell a near-twin without holding the task).
        "twins": sorted({t.twin_key for t in seal.real_tasks}),
        "sketches": sorted({twins.sketch_text(t.sketch) for t in seal.real_tasks}),
        "shown_twins": sorted({t.twin_key for t in seal.train().tasks}),
        "shown_sketches": sorted({twins.sketch_text(t.sketch) for t in seal.train().tasks}),
    }
