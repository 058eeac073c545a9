"""Timing library calls from a bench, without changing the library.

`Stopwatch.wrap(owner, "name", "label")` replaces `owner.name` (a module's function, a
class's method) with one that adds the wall time of each call to `label`, and puts the
original back when the stopwatch closes. Wrap a name where the caller looks it up: a
module that did `from x import f` holds its own `f`.

A call made inside another timed call is also added to the pair (outer label, label),
so a bench can take, say, the model's time out of the trials' time. A label counts once
however deeply it recurses; each asyncio task keeps its own nesting (a context
variable). Wall time is what is added: a coroutine that waits is charged whatever else
ran meanwhile, so time only coroutines that never wait, or ones awaited one at a time.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections import defaultdict
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType
from typing import Any

_ACTIVE: ContextVar[tuple[str, ...]] = ContextVar("timed_labels", default=())


@dataclass
class Spent:
    seconds: float = 0.0
    calls: int = 0

    def add(self, seconds: float) -> None:
        self.seconds += seconds
        self.calls += 1

    @property
    def each_ms(self) -> float:
        return self.seconds * 1e3 / self.calls if self.calls else 0.0


class Stopwatch:
    def __init__(self) -> None:
        self.spent: defaultdict[str, Spent] = defaultdict(Spent)
        self.within: defaultdict[tuple[str, str], Spent] = defaultdict(Spent)
        self._originals: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, name: str, label: str) -> None:
        """Times `owner.name`: a module's function or a class's (plain) method."""
        function = getattr(owner, name)
        own = vars(owner).get(name)  # None when a class inherits it: close() then removes the wrapper
        timed = self._async(function, label) if inspect.iscoroutinefunction(function) else self._sync(function, label)
        self._originals.append((owner, name, own))
        setattr(owner, name, timed)

    def close(self) -> None:
        """Puts every wrapped name back as it was."""
        while self._originals:
            owner, name, own = self._originals.pop()
            if own is None:
                delattr(owner, name)
            else:
                setattr(owner, name, own)

    def __enter__(self) -> Stopwatch:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def seconds(self, label: str, within: str | None = None) -> float:
        return (self.within[within, label] if within else self.spent[label]).seconds

    def _sync(self, function: Callable[..., Any], label: str) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            active = _ACTIVE.get()
            if label in active:
                return function(*args, **kwargs)
            token = _ACTIVE.set((*active, label))
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self._add(label, active, time.perf_counter() - started)
                _ACTIVE.reset(token)

        return timed

    def _async(self, function: Callable[..., Any], label: str) -> Callable[..., Any]:
        @functools.wraps(function)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            active = _ACTIVE.get()
            if label in active:
                return await function(*args, **kwargs)
            token = _ACTIVE.set((*active, label))
            started = time.perf_counter()
            try:
                return await function(*args, **kwargs)
            finally:
                self._add(label, active, time.perf_counter() - started)
                _ACTIVE.reset(token)

        return timed

    def _add(self, label: str, active: tuple[str, ...], seconds: float) -> None:
        self.spent[label].add(seconds)
        if active:
            self.within[active[-1], label].add(seconds)
