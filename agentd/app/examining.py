"""The agent's side of an examiner (agentd.app.examiner): its key fetched and checked, a
seal handed over, and the sealed tasks' confirmations asked of it and put on the ledger.

Whatever goes wrong between here and the examiner (it is down, slow, answers garbage)
stops the loop with one line and nothing judged: a confirmation the examiner could not
give is errored, never a change that failed. An examination it signed whose answer was
lost is not lost: the examiner keeps every one it signs, and each ask first appends
those the ledger does not hold yet.
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

from agentd.app.examiner import SUITE, check_key_document, seal_info
from agentd.errors import AgentdError
from improver import Examined, Seal, Stop, Variant, examination_of, examined_from
from ledger import Entry, EntryError, Ledger, LedgerError

KEY_SECONDS = 10.0  # fetching a key or a seal's state
EXAMINE_SECONDS = 3600.0  # an examination runs two arms of trials on the examiner's side


class ExaminerUnreachable(AgentdError):
    """The examiner did not answer, or not as an examiner answers."""


def _call(method: str, url: str, seconds: float, **kwargs: Any) -> dict[str, Any]:
    try:
        answer = httpx.request(method, url, timeout=seconds, **kwargs)
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
        raise AgentdError(f"the examiner refused: {data.get('error', f'HTTP {answer.status_code}')}")
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


@dataclass
class RemoteExamination:
    """The seal's confirmations asked of the examiner that holds its sealed tasks; each
    examination it signs is appended to the ledger, and what the loop is told is read
    back from the entry the ledger took."""

    seal: Seal
    ledger: Ledger
    baseline_runs: int
    seconds: float = EXAMINE_SECONDS

    @property
    def url(self) -> str:
        assert self.seal.held_by is not None
        return self.seal.held_by.rstrip("/")

    async def examine(self, change: Variant, current: Variant, gain_choose: float, runs: int) -> Examined:
        """Asks the examiner (its HTTP in a thread, so a stop is heard meanwhile; the
        ledger on this one)."""
        named, claim = self.seal.terms.examiner, self.seal.state().claim
        assert named is not None
        if claim is None:
            raise Stop(f"seal {self.seal.id} is not on the ledger: an examiner's seal is confirmed on it")
        try:
            served = await asyncio.to_thread(fetch_key, self.url, named["wallet"])
            if served["key"] != named["key"]:
                raise Stop(
                    f"the examiner at {self.url} now serves another key than seal {self.seal.id} was sealed to; "
                    "nothing was asked"
                )
            await self.catch_up()
            body = {
                "change": change.to_json(),
                "current": current.to_json(),
                "runs": runs,
                "baseline_runs": self.baseline_runs,
                "gain": gain_choose,
                "seal_claim": claim,
                "log": self.ledger.origin,
                "seq": self.ledger.next_sequence(named["wallet"]),
            }
            url = f"{self.url}/v1/examiner/seals/{self.seal.id}/examinations"
            answer = await asyncio.to_thread(_call, "POST", url, self.seconds, json=body)
            entry = self._append(_entry_bytes(answer, "examination"))
        except AgentdError as exc:
            raise Stop(f"{exc}; the change is not judged, and the loop stops") from None
        return examined_from(entry.body, entry.claim_id)

    async def catch_up(self) -> None:
        """Appends the examinations the examiner signed that the ledger does not hold yet
        (one whose answer was lost on the way)."""
        url = f"{self.url}/v1/examiner/seals/{self.seal.id}"
        state = await asyncio.to_thread(_call, "GET", url, KEY_SECONDS)
        for raw in state.get("examinations", []):
            if not isinstance(raw, str):
                raise ExaminerUnreachable("the examiner's seal state lists an examination that is not an entry")
            try:
                claim = Entry.parse(raw.encode()).claim_id
            except EntryError as exc:
                raise ExaminerUnreachable(f"the examiner lists an examination that is not an entry ({exc})") from None
            if examination_of(self.ledger.state(), claim) is None:
                self._append(raw.encode())

    def _append(self, raw: bytes) -> Entry:
        try:
            (entry,) = self.ledger.append_raw([raw])
        except LedgerError as exc:
            raise AgentdError(f"the ledger refused the examiner's examination: {exc}") from None
        return entry
