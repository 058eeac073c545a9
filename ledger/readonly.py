"""The fold as readers get it: a deep copy that no one can change.

A ledger hands the same copy of its fold to every reader until the log grows (see
ledger.reading), so one reader changing it would change what the next one reads. The
copy is therefore read-only all the way down: its dicts and lists are subclasses of
the built-in ones that refuse every change, so they still read, compare and print
(json, orjson) as before. `State.copy` and `copy.deepcopy` of it give a plain State the
caller may change throughout; `dict(...)` of a part, one whose own items it may change.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, NoReturn

from ledger.rules import State

REFUSED = "the ledger's state is read-only: change a copy of it (State.copy, or dict(...) of a part)"


def _refuse(*args: object, **kwargs: object) -> NoReturn:
    raise TypeError(REFUSED)


class ReadOnlyDict(dict[str, Any]):
    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[type[dict[str, Any]], tuple[dict[str, Any]]]:
        # Copying and pickling build a plain dict: the built-in way would set each item.
        return dict, (dict(self),)


class ReadOnlyList(list[Any]):
    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __reduce__(self) -> tuple[type[list[Any]], tuple[list[Any]]]:
        return list, (list(self),)


class ReadOnlyState(State):
    """A copy of a fold that refuses every change, its parts included."""

    def __init__(self, state: State) -> None:
        for each in fields(State):
            object.__setattr__(self, each.name, read_only(getattr(state, each.name)))

    def __setattr__(self, name: str, value: object) -> None:
        _refuse()

    def __delattr__(self, name: str) -> None:
        _refuse()

    def __reduce__(self) -> tuple[type[State], tuple[Any, ...]]:
        # A copy is a plain State (its parts copied deep or not, as asked): the caller's.
        return State, tuple(getattr(self, each.name) for each in fields(State))

    def ns(self, name: str) -> dict[str, Any]:
        """The namespace `name`, empty when no rule wrote to it (never made here)."""
        return self.namespaces.get(name, _EMPTY)


_EMPTY = ReadOnlyDict()


def read_only(value: Any) -> Any:
    """A read-only deep copy of JSON data (the namespaces hold nothing else)."""
    # Each container is copied whole by the built-in constructor, and only the containers
    # in it are replaced: about as quick as State.copy's JSON round trip, where a walk that
    # copies item by item takes half as long again.
    kind = type(value)
    if kind is dict:
        copied = ReadOnlyDict(value)
        for key, item in value.items():
            if type(item) is dict or type(item) is list:
                dict.__setitem__(copied, key, read_only(item))
        return copied
    if kind is list:
        listed = ReadOnlyList(value)
        for index, item in enumerate(value):
            if type(item) is dict or type(item) is list:
                list.__setitem__(listed, index, read_only(item))
        return listed
    return value
