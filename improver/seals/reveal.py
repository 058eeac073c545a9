"""A seal an examiner held, revealed: its sealed tasks, and every examination it made on
them with what it was asked, in one bundle whose digest the examiner signs
(agent.seal-reveal/v1).

Whoever holds the bundle checks it against the seal's claim (the seal's id, the sealed
tasks' digest and content keys, all published before anything was asked) and against the
reveal entry (its digest, the examinations it lists), then may rerun any examination:
so an examiner that lied about what its sealed tasks said is shown to have lied, and can
be challenged on the bond it examined on.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from improver.base.errors import ImproverError
from improver.base.files import write_atomic
from improver.base.nesting import TooDeep, loads_bounded
from improver.seals.seal import Seal, Terms, is_canary, open_seal
from improver.tasks.task import parse_set

FORMAT = 1


def bundle_bytes(seal_file: dict[str, Any], asked: list[tuple[str, dict[str, Any]]]) -> bytes:
    """The bundle an examiner reveals: its seal file as it held it, and each examination's
    claim beside what it was asked, in one byte form (sorted keys, no spaces)."""
    bundle = {
        "format": FORMAT,
        "seal": seal_file,
        "examinations": [{"claim": claim, "asked": request} for claim, request in asked],
    }
    return json.dumps(bundle, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class Revealed:
    """A bundle that holds up against its seal's claim."""

    seal_file: dict[str, Any]
    asked: dict[str, dict[str, Any]]  # examination claim -> what it was asked
    digest: str
    tasks: int  # the real sealed tasks
    canaries: int

    def open(self, folder: Path) -> Seal:
        """The revealed seal as a seal file in `folder` (a copy to rerun on: nothing the
        reruns spend reaches the examiner's)."""
        terms = Terms(**self.seal_file["terms"])
        path = folder / f"revealed-{terms.id}.json"
        write_atomic(path, json.dumps(self.seal_file, ensure_ascii=False))
        return open_seal(path)


def read_revealed(raw: bytes, claim: dict[str, Any], digest: str | None = None) -> Revealed:
    """The bundle `raw`, checked against the seal claim's body `claim` and, when given,
    the digest the reveal entry signed; ImproverError naming the first thing that does
    not match."""
    found = hashlib.sha256(raw).hexdigest()
    if digest is not None and found != digest:
        raise ImproverError(f"the revealed bundle hashes to {found}, not {digest}, the digest the examiner signed")
    try:
        data = loads_bounded(raw)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"it is not a format {FORMAT} bundle")
        seal_file, listed = data["seal"], data["examinations"]
        terms = Terms(**seal_file["terms"])
        sealed = parse_set(seal_file["tasks"], "the revealed seal")
        asked = {str(e["claim"]): dict(e["asked"]) for e in listed}
    except (ValueError, TooDeep, KeyError, TypeError, ImproverError) as exc:
        raise ImproverError(f"the revealed bundle is malformed: {exc}") from None
    if terms.id != claim["seal"]:
        raise ImproverError(f"the revealed seal is {terms.id}, not seal {claim['seal']} the claim names")
    if sealed.digest != claim["sealed_digest"]:
        raise ImproverError(
            f"the revealed sealed tasks hash to {sealed.digest}, not {claim['sealed_digest']}, the digest seal "
            f"{claim['seal']}'s claim published before anything was asked"
        )
    real = [t for t in sealed.tasks if not is_canary(t)]
    contents = sorted({t.content_key for t in real})
    if "contents" in claim and contents != claim["contents"]:
        raise ImproverError(
            f"the revealed sealed tasks' content keys are not the {len(claim['contents'])} seal {claim['seal']}'s claim published"
        )
    return Revealed(seal_file, asked, found, len(real), len(sealed.tasks) - len(real))
