"""The agent's side of an examiner (agentd.app.examiner): its key fetched and checked, a
seal handed over, the sealed tasks' confirmations asked of it and put on the ledger, and
the seal retired and revealed.

Whatever goes wrong between here and the examiner (it is down, slow, answers garbage)
stops the loop with one line and nothing judged: a confirmation the examiner could not
give is errored, never a change that failed. An examination it signed whose answer was
lost is not lost: the examiner keeps every one it signs, and an ask whose ledger lacks
one is answered with it, to append first.

A confirmation is one request on one kept-alive connection: the examination's entry is
signed by the wallet the seal names, which is what the ledger checks, so the key (used
only to hand the tasks over) is not fetched again.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

from agentd.app.examiner import check_key_document, seal_info
from agentd.app.keydocs import SUITE
from agentd.app.ledger import open_ledger
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.wallets import load_wallet
from improver import (
    SEAL_RETIREMENT,
    SEAL_REVEAL,
    Examined,
    ImproverError,
    Revealed,
    Seal,
    Stop,
    Variant,
    current_seal,
    examination_of,
    examinations_on,
    examined_from,
    open_seal,
    read_revealed,
    seal_record,
    turned_down_by_examiner,
    write_atomic,
)
from ledger import Entry, EntryError, Ledger, LedgerError

KEY_SECONDS = 10.0  # fetching a key or a seal's state
EXAMINE_SECONDS = 3600.0  # an examination runs two arms of trials on the examiner's side


class ExaminerUnreachable(AgentdError):
    """The examiner did not answer, or not as an examiner answers."""


class ExaminerSaidNo(AgentdError):
    """The examiner refused (an HTTP 4xx), with what it sent beside its reason."""

    def __init__(self, status: int, answer: dict[str, Any]) -> None:
        super().__init__(f"the examiner refused: {answer.get('error', f'HTTP {status}')}")
        self.status, self.answer = status, answer


def _call(method: str, url: str, seconds: float, client: httpx.Client | None = None, **kwargs: Any) -> dict[str, Any]:
    try:
        if client is None:
            answer = httpx.request(method, url, timeout=seconds, **kwargs)
        else:
            answer = client.request(method, url, timeout=seconds, **kwargs)
    except httpx.TimeoutException:
        raise ExaminerUnreachable(f"the examiner at {url} did not answer within {seconds:g} s") from None
    except httpx.HTTPError as exc:
        raise ExaminerUnreachable(f"the examiner at {url} cannot be reached ({exc})") from None
    try:
        data = answer.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise ExaminerUnreachable(f"the examiner at {url} answered HTTP {answer.status_code} with no JSON object")
    if answer.status_code >= 400:
        raise ExaminerSaidNo(answer.status_code, data)
    return data


def fetch_key(url: str, wallet: str | None = None) -> dict[str, str]:
    """The examiner's {wallet, key} as a seal names it, from its signed key document."""
    return check_key_document(_call("GET", f"{url.rstrip('/')}/v1/examiner/key", KEY_SECONDS), wallet)


def hand_over_tasks(url: str, seal: Seal, ledger: Ledger) -> bytes:
    """Sends the seal's file, encrypted to the key its terms name, to the examiner; the
    receipt entry it signed for this log."""
    named = seal.terms.examiner
    assert named is not None
    key = X25519PublicKey.from_public_bytes(bytes.fromhex(named["key"]))
    sealed = SUITE.encrypt(seal.path.read_bytes(), key, info=seal_info(seal.id))
    body = {
        "sealed": base64.b64encode(sealed).decode(),
        "log": ledger.origin,
        "seq": ledger.next_sequence(named["wallet"]),
    }
    answer = _call("PUT", f"{url.rstrip('/')}/v1/examiner/seals/{seal.id}", KEY_SECONDS * 6, json=body)
    return _entry_bytes(answer, "receipt")


def _entry_bytes(answer: dict[str, Any], name: str) -> bytes:
    raw = answer.get(name)
    if not isinstance(raw, str):
        raise ExaminerUnreachable(f"the examiner's answer holds no {name}")
    return raw.encode()


def _append(ledger: Ledger, raw: bytes, what: str) -> Entry:
    try:
        (entry,) = ledger.append_raw([raw])
    except LedgerError as exc:
        raise AgentdError(f"the ledger refused the examiner's {what}: {exc}") from None
    return entry


def _append_missing(ledger: Ledger, seal_claim: str, listed: Any) -> None:
    """Appends the examinations the examiner signed that the ledger does not hold yet
    (one whose answer was lost on the way), in the order it signed them."""
    if not isinstance(listed, list) or not all(isinstance(raw, str) for raw in listed):
        raise ExaminerUnreachable("the examiner lists examinations that are not entries")
    held = set(examinations_on(ledger.state(), seal_claim))
    for raw in listed:
        try:
            claim = Entry.parse(raw.encode()).claim_id
        except EntryError as exc:
            raise ExaminerUnreachable(f"the examiner lists an examination that is not an entry ({exc})") from None
        if claim not in held:
            _append(ledger, raw.encode(), "examination")


# A code change's patches (by SHA-256) and commands, for both arms, as an examiner is
# handed them to rebuild (agentd.app.rebuilt.code_asked); the code loop's workshop has them.
CodeHandedOver = Callable[[Variant, Variant], dict[str, Any]]


@dataclass
class RemoteExamination:
    """The seal's confirmations asked of the examiner that holds its sealed tasks; each
    examination it signs is appended to the ledger, and what the loop is told is read
    back from the entry the ledger took."""

    seal: Seal
    ledger: Ledger
    baseline_runs: int
    seconds: float = EXAMINE_SECONDS
    client: httpx.Client = field(default_factory=httpx.Client)  # one connection, kept alive, for every ask
    code: CodeHandedOver | None = None  # a code loop's: what the examiner rebuilds its arms from

    @property
    def url(self) -> str:
        assert self.seal.held_by is not None
        return self.seal.held_by.rstrip("/")

    async def examine(self, change: Variant, current: Variant, gain_choose: float, runs: int) -> Examined:
        """Asks the examiner (its HTTP in a thread, so a stop is heard meanwhile; the
        ledger on this one)."""
        claim = self.seal.state().claim
        if claim is None:
            raise Stop(f"seal {self.seal.id} is not on the ledger: an examiner's seal is confirmed on it")
        asked = {
            "change": change.to_json(),
            "current": current.to_json(),
            "runs": runs,
            "baseline_runs": self.baseline_runs,
            "gain": gain_choose,
            "seal_claim": claim,
        }
        if change.commit:
            if self.code is None:
                raise Stop("a code change is confirmed by an examiner only with its patches handed over")
            asked["code"] = self.code(change, current)
        try:
            return await self._ask(asked, claim)
        except AgentdError as exc:
            raise Stop(f"{exc}; the change is not judged, and the loop stops") from None

    async def _ask(self, asked: dict[str, Any], claim: str) -> Examined:
        named = self.seal.terms.examiner
        assert named is not None
        url = f"{self.url}/v1/examiner/seals/{self.seal.id}/examinations"
        for _ in range(2):  # a second time only after appending what the first answer said was missing
            body = {
                **asked,
                "log": self.ledger.origin,
                "seq": self.ledger.next_sequence(named["wallet"]),
                "held": examinations_on(self.ledger.state(), claim),
            }
            try:
                answer = await asyncio.to_thread(_call, "POST", url, self.seconds, self.client, json=body)
            except ExaminerSaidNo as exc:
                if exc.status == 422:  # the change holds the sealed tasks' words: turned down, nothing spent
                    return turned_down_by_examiner(f"the examiner turned it down: {exc.answer.get('error')}")
                if exc.status != 409 or "missing" not in exc.answer:
                    raise
                _append_missing(self.ledger, claim, exc.answer["missing"])
                continue
            entry = _append(self.ledger, _entry_bytes(answer, "examination"), "examination")
            return examined_from(entry.body, entry.claim_id)
        raise ExaminerUnreachable("the examiner still lists examinations missing here after they were appended")


# -- a seal retired and revealed ---------------------------------------------------------


@dataclass(frozen=True)
class RevealDone:
    """A seal revealed: where its bundle is kept, what it holds, the reveal's claim."""

    seal: str
    path: Path
    tasks: int
    canaries: int
    examinations: int
    retired: bool  # by this call (its publisher's retirement appended), not spent
    claim: str


def reveal_seal(home: Home, profile: str, wallet: str, seal_id: str | None = None, retire: bool = False) -> RevealDone:
    """Asks the examiner holding the profile's seal (the current one, or `seal_id`) to
    reveal it, once its confirmations are spent or, with `retire`, retiring it first
    (signed by `wallet`, the seal's publisher); appends what the examiner signs, checks
    the bundle against the seal's claim and keeps it in routes/."""
    seal = _examiners_seal(home, profile, seal_id)
    claim = seal.state().claim
    if claim is None:
        raise AgentdError(f"seal {seal.id} was never published on the ledger: there is nothing to reveal")
    url = f"{(seal.held_by or '').rstrip('/')}/v1/examiner/seals/{seal.id}"
    with open_ledger(home) as ledger:
        held = _call("GET", url, KEY_SECONDS)
        _append_missing(ledger, claim, held.get("examinations", []))
        record = seal_record(ledger.state(), claim)
        assert record is not None
        retirement, retired = _retirement(home, ledger, claim, record, wallet, retire)
        named = seal.terms.examiner
        assert named is not None
        body = {
            "claim": ledger.find(claim).raw.decode(),
            "retirement": retirement.decode() if retirement else None,
            "log": ledger.origin,
            "seq": ledger.next_sequence(named["wallet"]),
        }
        answer = _call("POST", f"{url}/reveal", KEY_SECONDS * 6, json=body)
        raw, bundle = _entry_bytes(answer, "reveal"), _entry_bytes(answer, "bundle")
        reveal = _the_reveal(ledger, claim) or _append(ledger, raw, "reveal")
        revealed = _checked(ledger, claim, reveal, bundle)
    path = home.routes.revealed(profile, seal.id)
    write_atomic(path, bundle.decode())
    return RevealDone(seal.id, path, revealed.tasks, revealed.canaries, len(revealed.asked), retired, reveal.claim_id)


def _examiners_seal(home: Home, profile: str, seal_id: str | None) -> Seal:
    try:
        seal = open_seal(home.routes.sealed(profile, seal_id)) if seal_id else current_seal(home.routes, profile)
    except ImproverError as exc:
        raise AgentdError(str(exc)) from None
    if seal.held_by is None:
        raise AgentdError(
            f"seal {seal.id} is held here, not by an examiner: its sealed tasks are in its file, with nothing to reveal"
        )
    return seal


def _retirement(
    home: Home, ledger: Ledger, claim: str, record: dict[str, Any], wallet: str, retire: bool
) -> tuple[bytes | None, bool]:
    """The seal's retirement entry to show the examiner (appended now, or earlier), and
    whether this call retired it; none when its confirmations are all spent."""
    if "retired" in record:
        earlier = next((e for e in ledger.entries(kind=SEAL_RETIREMENT) if e.body["seal_claim"] == claim), None)
        return (earlier.raw if earlier else None), False
    if record["examined"] >= record["confirmations"]:
        return None, False
    if not retire:
        left = record["confirmations"] - record["examined"]
        raise AgentdError(
            f"seal {record['seal']} has {left} of its {record['confirmations']} confirmations left: spend them, or give "
            "--retire to retire it now (it then confirms no more changes) and reveal it"
        )
    signer = load_wallet(home, wallet)
    if signer.id != record["author"]:
        raise AgentdError(f"seal {record['seal']} was published by wallet {record['author']}: only it retires the seal")
    return ledger.append(signer, SEAL_RETIREMENT, {"seal_claim": claim}).raw, True


def _the_reveal(ledger: Ledger, claim: str) -> Entry | None:
    return next((e for e in ledger.entries(kind=SEAL_REVEAL) if e.body["seal_claim"] == claim), None)


def _checked(ledger: Ledger, claim: str, reveal: Entry, bundle: bytes) -> Revealed:
    """The bundle, held against the seal's claim, the reveal's digest and every
    examination of the seal on the ledger (each there, asked about the very change)."""
    try:
        revealed = read_revealed(bundle, ledger.find(claim).body, reveal.body["bundle"])
    except ImproverError as exc:
        raise AgentdError(f"the examiner's reveal does not hold up: {exc}") from None
    state = ledger.state()
    for exam in examinations_on(state, claim):
        asked, found = revealed.asked.get(exam), examination_of(state, exam)
        if asked is None or found is None or _variant_id(asked.get("change")) != found["change"]:
            raise AgentdError(
                f"the examiner's reveal does not hold up: it does not hold what examination {exam[:16]} was asked"
            )
    return revealed


def _variant_id(data: Any) -> str | None:
    try:
        return Variant.from_json(data).id
    except (ImproverError, TypeError, ValueError, AttributeError):
        return None
