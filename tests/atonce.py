"""Races between real processes, cheaply: the children are forked from the test (so they
pay no start-up or imports) and released together from a barrier."""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import traceback
from collections.abc import Callable
from typing import Any

FORK = multiprocessing.get_context("fork")


def _child(fn: Callable[..., Any], args: tuple[Any, ...], barrier: Any, results: Any, index: int) -> None:
    out = io.StringIO()
    try:
        barrier.wait(60)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            value = fn(*args)
        results.put((index, value, out.getvalue()))
    except BaseException:  # reported to the test, which fails on it
        results.put((index, None, out.getvalue() + traceback.format_exc()))


def all_at_once(count: int, fn: Callable[..., Any], *args: Any) -> list[tuple[Any, str]]:
    """Runs `fn(*args)` in `count` forked processes released together; each one's
    (return value, what it printed), in the order the processes were made."""
    barrier, results = FORK.Barrier(count), FORK.Queue()
    procs = [FORK.Process(target=_child, args=(fn, args, barrier, results, i)) for i in range(count)]
    for p in procs:
        p.start()
    got = dict((i, (value, text)) for i, value, text in (results.get(timeout=120) for _ in procs))
    for p in procs:
        p.join(60)
    return [got[i] for i in range(count)]
