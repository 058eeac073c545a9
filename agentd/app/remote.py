"""Auditing a daemon's ledger from another machine: entries, tiles and checkpoints are
fetched over HTTP (ledger.RemoteRecorder) and everything is checked here, against the
log's own key (named by its first entry) and a checkpoint the auditor kept.

A server that lies is caught as a local store that was tampered with would be: by
`verify`'s full recomputation, or, for one proof, by the proof not leading to the root
the log's key signed, or by that root not extending the auditor's kept checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentd.app.ledger import rule_set
from agentd.errors import AgentdError
from ledger import (
    Checkpoint,
    ConsistencyProof,
    Entry,
    InclusionProof,
    Ledger,
    LedgerError,
    ProofError,
    RemoteRecorder,
    Wallet,
    verify_checkpoint,
)

if TYPE_CHECKING:  # at run time only post_remote imports it, so no other command loads an HTTP client
    import httpx


def open_remote(url: str) -> Ledger:
    """The ledger a daemon serves at `url`, read over HTTP, for auditing only."""
    return Ledger(RemoteRecorder(url), rule_set(), check=False)


@dataclass(frozen=True)
class RemoteProof:
    proof: dict[str, Any]
    checkpoint: str  # the log's signed checkpoint the proof leads to
    extends: int | None  # the size of the auditor's kept checkpoint it was shown to extend


def prove_remote(url: str, ref: str | None, size: int | None, from_size: int | None, kept: str | None) -> RemoteProof:
    """An inclusion proof of `ref` (a Pulse or claim), or a consistency proof from
    `from_size`, computed here from the daemon's tiles and checked here against the
    log's signed checkpoint of the tree it proves, and against `kept` when given."""
    with open_remote(url) as ledger:
        key, origin = ledger.public_key, ledger.origin
        note = ledger.checkpoint_of(size) if size else ledger.latest_checkpoint()
        if note is None:
            raise AgentdError(
                f"the daemon at {url} has no signed checkpoint {f'of size {size}' if size else 'yet'} to prove against"
            )
        try:
            signed = verify_checkpoint(note, key, origin)
        except LedgerError as exc:
            raise LedgerError(f"the daemon's checkpoint is not the log's: {exc}") from None
        proof: InclusionProof | ConsistencyProof
        if ref is not None:
            entry = ledger.get(int(ref)) if ref.isdigit() and len(ref) < 8 else ledger.find(ref)
            proof = ledger.inclusion_proof(entry.pulse or 0, signed.size)
            root = proof.root
        else:
            proof = ledger.consistency_proof(from_size or 1, signed.size)
            root = proof.new_root
        extends = _extends(ledger, kept, signed, key, origin) if kept else None
    try:
        proof.verify()
    except ProofError as exc:
        raise LedgerError(f"the daemon's proof does not hold: {exc}") from None
    if root != signed.root:
        raise LedgerError(
            "the daemon's proof leads to another root than the one its log's key signed: its tree was altered"
        )
    return RemoteProof(proof.to_json(), note, extends)


def post_remote(url: str, wallet: Wallet, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    """Signs an entry here for the daemon's log (its origin and the wallet's next sequence
    number asked of it) and posts it; the daemon's answer (its Pulse, claim and receipt)."""
    import httpx

    base = url.rstrip("/")
    try:
        with httpx.Client(base_url=base, timeout=30.0) as client:
            found = client.get(f"/v1/authors/{wallet.id}")
            if found.status_code != 200:
                raise AgentdError(f"the daemon at {url} answered {found.status_code}: {_said(found)}")
            where = found.json()
            entry = Entry.create(wallet, kind, body, log=where["origin"], seq=where["next_sequence"])
            answer = client.post("/v1/entries", content=entry.raw, headers={"content-type": "application/json"})
    except httpx.HTTPError as exc:
        raise AgentdError(f"cannot reach the daemon at {url}: {exc}") from None
    if answer.status_code != 201:
        raise AgentdError(f"the daemon at {url} refused the entry ({answer.status_code}): {_said(answer)}")
    return dict(answer.json())


def _said(answer: httpx.Response) -> str:
    try:
        return str(answer.json()["error"])
    except (ValueError, KeyError, TypeError):
        return answer.text.strip()[:200]


def _extends(ledger: Ledger, kept: str, signed: Checkpoint, key: bytes, origin: str) -> int:
    """The kept checkpoint's size, once the log's signed tree is shown to extend it."""
    size = signed.size
    old = verify_checkpoint(kept, key, origin)
    if old.size > size:
        raise LedgerError(
            f"the log's checkpoint of {size} entries is older than the one you kept ({old.size}): it shrank"
        )
    proof = ledger.consistency_proof(old.size, size)
    try:
        proof.verify()
    except ProofError as exc:
        raise LedgerError(f"the log does not extend the checkpoint you kept: {exc}") from None
    if proof.old_root != old.root or proof.new_root != signed.root:
        raise LedgerError(f"the log does not extend the checkpoint you kept at size {old.size}: it was rewritten")
    return old.size
