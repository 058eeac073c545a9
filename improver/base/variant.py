"""A variant: what one trial runs, the agent as a change would make it.

The operator's words are the operator's (the loop never rewrites them); the lessons and
the models are what a change may touch. A variant of the agent's code also names the
commit it is built from and the digest of the patch applied to it (improver/code/codeloop.py);
a variant without them is the runtime agentd runs. A variant is named by a short digest of its
content, so the same agent tried twice is recognised as the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from improver.base.digests import digest
from improver.base.errors import ImproverError

ID_LENGTH = 16


@dataclass(frozen=True)
class Variant:
    operator: str
    lessons: str
    models: tuple[str, ...]
    commit: str = ""  # the code's commit, for a variant built from code
    patch: str = ""  # the SHA-256 of the patch applied to that commit, if any

    def __post_init__(self) -> None:
        if not isinstance(self.models, tuple):
            object.__setattr__(self, "models", tuple(self.models))

    @property
    def id(self) -> str:
        return digest(self.to_json())[:ID_LENGTH]

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"operator": self.operator, "lessons": self.lessons, "models": list(self.models)}
        if self.commit:  # only then, so the runtime's variants keep the ids they had
            body["code"] = {"commit": self.commit, "patch": self.patch}
        return body

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Variant:
        try:
            code = data.get("code") or {}
            models = tuple(str(m) for m in data["models"])
            return cls(
                str(data["operator"]),
                str(data["lessons"]),
                models,
                str(code.get("commit", "")),
                str(code.get("patch", "")),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ImproverError(f"not a variant: missing or malformed {exc}") from None
