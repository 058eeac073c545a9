"""Twins: tasks that are the same task however they were written down.

A task's digest covers its exact bytes, so a sealed task with a trailing space, in
lower case, without its full stop, or asked "Please pay" instead of "Pay" would be a
new task to every separation rule. Two identities survive such edits:

- the twin key: a digest of the task's normal form (what was asked, the stand-ins'
  inputs and the checks, every text in them NFKC-folded, case-folded, its punctuation
  and runs of spaces made one space), equal for tasks that differ only in case,
  spacing and punctuation;
- the sketch: a MinHash signature (`HASHES` hashes) of the task's shingles (runs of
  three words of its normal ask, and each normal stand-in input and check whole), with
  a digest of its normal checks (`checks_key`). Two tasks whose checks are the same and
  whose sketches agree in at least `NEAR` of their places are near-twins: their
  shingles overlap by about that share (Jaccard similarity), which a reworded ask with
  the same inputs and checks reaches ("Please pay invoice 21 ..." against "Pay invoice
  21 ...": 0.89; a greeting before it: 0.95) and a task about another invoice does not
  (the same payee and amount, another invoice number: 0.59; the invoices example's own
  tasks: at most 0.16). Tasks whose checks differ are never near-twins, however alike
  their asks: a right run of one is not a right run of the other (τ²-bench's retail
  domain has families of such tasks, one scenario with other outcomes, some of them
  across its own train/test split). A sketch can be published (a seal's claim carries
  its sealed tasks' sketches) without the task.

`Twins` answers, for a task, which of the tasks it was given it is a twin or near-twin
of, using the sketches' bands (`BANDS` of `ROWS` places) to find candidates without
comparing every pair.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Generic, TypeVar

from improver.base.digests import digest

HASHES = 64
ROWS = 2  # places a band; a pair agreeing at 0.7 of its places shares a band with P > 0.99999
BANDS = HASHES // ROWS
NEAR = 0.7  # the share of agreeing places from which two tasks with the same checks are near-twins
SHINGLE = 3  # words a shingle of the ask
CHECKS_HEX = 16  # hex digits of the checks' digest a sketch carries
_PUNCTUATION = re.compile(r"[^\w\s]+|_")
_SPACE = re.compile(r"\s+")
_MASK = (1 << 64) - 1


def normal_text(text: str) -> str:
    """Case, compatibility forms, punctuation and spacing folded away."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _SPACE.sub(" ", _PUNCTUATION.sub(" ", folded)).strip()


def _normal(value: Any) -> Any:
    if isinstance(value, str):
        return normal_text(value)
    if isinstance(value, dict):
        return {normal_text(str(k)): _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def normal_form(ask: str, standins: list[dict[str, Any]], checks: list[dict[str, Any]]) -> dict[str, Any]:
    inputs = sorted(json.dumps(_normal([s["tool"], s["arguments"]]), sort_keys=True) for s in standins)
    held = sorted(json.dumps(_normal(c), sort_keys=True) for c in checks)
    return {"task": normal_text(ask), "inputs": inputs, "checks": held}


def twin_key(ask: str, standins: list[dict[str, Any]], checks: list[dict[str, Any]]) -> str:
    return digest(normal_form(ask, standins, checks))


def checks_key(checks: list[dict[str, Any]]) -> str:
    """A short digest of a task's normal checks: near-twins share it."""
    return digest(normal_form("", [], checks)["checks"])[:CHECKS_HEX]


def shingles(ask: str, standins: list[dict[str, Any]], checks: list[dict[str, Any]]) -> frozenset[str]:
    form = normal_form(ask, standins, checks)
    words = form["task"].split()
    runs = {" ".join(words[i : i + SHINGLE]) for i in range(max(len(words) - SHINGLE + 1, 1))}
    return frozenset(
        {f"ask:{r}" for r in runs} | {f"in:{i}" for i in form["inputs"]} | {f"check:{c}" for c in form["checks"]}
    )


@lru_cache(maxsize=1 << 16)
def _hashes(shingle: str) -> tuple[int, ...]:
    raw = hashlib.shake_256(shingle.encode()).digest(8 * HASHES)
    return tuple(int.from_bytes(raw[i : i + 8], "big") & _MASK for i in range(0, 8 * HASHES, 8))


def sketch(parts: frozenset[str]) -> tuple[int, ...]:
    """The MinHash signature of a set of shingles (all zeros for none)."""
    if not parts:
        return (0,) * HASHES
    every = [_hashes(p) for p in parts]
    return tuple(min(h[i] for h in every) for i in range(HASHES))


def agreement(a: tuple[int, ...], b: tuple[int, ...]) -> float:
    """The share of places two sketches agree in: an estimate of their Jaccard similarity."""
    return sum(x == y for x, y in zip(a, b, strict=True)) / HASHES


Sketch = tuple[str, tuple[int, ...]]  # (checks key, MinHash signature)


def sketch_text(sketch: Sketch) -> str:
    """A sketch as published: the checks key, then its places as 16 hex digits each."""
    checks, signature = sketch
    return checks + "".join(f"{x:016x}" for x in signature)


def sketch_of_text(text: str) -> Sketch | None:
    """A published sketch read back; None for one of another shape (an older claim's)."""
    if not isinstance(text, str) or len(text) != CHECKS_HEX + 16 * HASHES:
        return None
    try:
        body = text[CHECKS_HEX:]
        return text[:CHECKS_HEX], tuple(int(body[i : i + 16], 16) for i in range(0, len(body), 16))
    except ValueError:
        return None


T = TypeVar("T")


@dataclass
class Twins(Generic[T]):
    """Labelled sketches (a task's name, a seal's label, ...), asked which a sketch is near."""

    labels: list[T] = field(default_factory=list)
    sketches: list[tuple[int, ...]] = field(default_factory=list)
    bands: dict[tuple[str, int, tuple[int, ...]], list[int]] = field(default_factory=dict)

    def add(self, sketch: Sketch, label: T) -> None:
        index = len(self.sketches)
        self.labels.append(label)
        self.sketches.append(sketch[1])
        for band in _bands(sketch):
            self.bands.setdefault(band, []).append(index)

    def near(self, sketch: Sketch) -> T | None:
        """The label of the closest near-twin, or None."""
        found = self.all_near(sketch)
        return found[0] if found else None

    def all_near(self, sketch: Sketch) -> list[T]:
        """The labels of every near-twin (the same checks, agreeing at NEAR or more), the closest first."""
        candidates = {i for band in _bands(sketch) for i in self.bands.get(band, ())}
        shares = sorted((-agreement(sketch[1], self.sketches[i]), i) for i in candidates)  # the first added on a tie
        return [self.labels[i] for share, i in shares if -share >= NEAR]


def _bands(sketch: Sketch) -> Iterable[tuple[str, int, tuple[int, ...]]]:
    """A sketch's bands, each under its checks key: only tasks with the same checks meet."""
    checks, signature = sketch
    return ((checks, b, signature[b * ROWS : (b + 1) * ROWS]) for b in range(BANDS))


def groups(tasks: Iterable[Any]) -> dict[str, str]:
    """Each task's group among `tasks` (by name): tasks joined by a content key, a twin
    key or near sketches, transitively; a group is named by its least content key."""
    listed = list(tasks)
    parent = list(range(len(listed)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    near: Twins[int] = Twins()
    for i, task in enumerate(listed):
        for key in (task.content_key, task.twin_key):
            parent[root(i)] = root(first.setdefault(key, i))
        for close in near.all_near(task.sketch):
            parent[root(i)] = root(close)
        near.add(task.sketch, i)
    names: dict[int, str] = {}
    for i, task in enumerate(listed):
        r = root(i)
        names[r] = min(names.get(r, task.content_key), task.content_key)
    return {task.name: names[root(i)] for i, task in enumerate(listed)}
