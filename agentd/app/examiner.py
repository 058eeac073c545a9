"""The examiner: another party's home that holds a seal's sealed tasks, so they never live
on the improving agent's machine, and answers for them on the agent's ledger.

It publishes an X25519 key for HPKE (RFC 9180) in a document its wallet signs; a seal
handed to it arrives encrypted to that key, is checked against its own terms (its id,
its sealed digest, this examiner named in them) and kept in `examiner/seals/` under
this home; the receipt it signs names the seal and its sealed digest. Asked to confirm
a change, it runs the change and the agent as it is on the sealed tasks with its own
models, in its own process, under the seal's lock (so the confirmation counter and the
reusable holdout are its own, and no operator resets them), and signs an
agent.examination/v1 entry for the agent's log: counts, the test and the decision,
never a task's name or text. The agent appends what it signs; the ledger's rules take it
only from the examiner the seal names, with confirmations in order and never past k.

What it does not guarantee: it sees every change it is sent, and until the tasks are
revealed nobody can check that it ran them honestly (see `reveal`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hpke
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from agentd.app.agent import AGENT, model_factory
from agentd.errors import AgentdError
from agentd.home import PRIVATE_DIR, Home
from improver import (
    EXAMINATION,
    EXAMINER_RECEIPT,
    CanaryPassed,
    EpisodeLimits,
    ImproverError,
    LocalExamination,
    Seal,
    SealedBaseline,
    SealedText,
    Stop,
    TrialResult,
    Trials,
    Variant,
    canary_examination,
    examination_body,
    open_seal,
)
from ledger import Entry, EntryError, Wallet, signature_holds, wallet_id

KEY_KIND = "agentd.examiner-key/v1"
SUITE = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)
SUITE_NAME = "DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305"
LEFT_AS = "the examiner's seal is as its last finished examination left it"


class ExaminerRefused(AgentdError):
    """What the examiner will not do, said to whoever asked (an HTTP 4xx)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def seal_info(seal: str) -> bytes:
    """HPKE's info: binds a ciphertext to the one seal it was made for."""
    return f"agentd sealed tasks {seal}".encode()


def key_message(document: dict[str, Any]) -> bytes:
    """What the examiner's wallet signs of its key document: its fields but the signature,
    in one byte form (sorted keys, no spaces)."""
    fields = {k: v for k, v in document.items() if k != "signature"}
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


def check_key_document(document: Any, wallet: str | None = None) -> dict[str, str]:
    """{wallet, key} of a key document whose signature holds (and, with
    `wallet`, made by that wallet); AgentdError naming what is wrong otherwise."""
    if not isinstance(document, dict) or document.get("kind") != KEY_KIND:
        raise AgentdError(f"what the examiner serves as its key is not an {KEY_KIND} document")
    try:
        public = bytes.fromhex(document["public_key"])
        key = bytes.fromhex(document["key"])
        signature = base64.b64decode(document["signature"], validate=True)
        X25519PublicKey.from_public_bytes(key)
    except (KeyError, TypeError, ValueError) as exc:
        raise AgentdError(f"the examiner's key document is malformed ({exc})") from None
    if document.get("wallet") != wallet_id(public) or not signature_holds(public, signature, key_message(document)):
        raise AgentdError("the examiner's key document is not signed by the wallet it names: refusing its key")
    if wallet is not None and document["wallet"] != wallet:
        raise AgentdError(
            f"the examiner's key is published by wallet {document['wallet']}, not {wallet}, the examiner named"
        )
    return {"wallet": document["wallet"], "key": key.hex()}


@dataclass
class Examiner:
    """One examiner's home: its wallet, its HPKE key, its models, the seals it holds."""

    home: Home
    wallet: Wallet
    key: X25519PrivateKey
    models_dir: Path | None = None  # where `script:` models are read from
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)
    concurrency: int = 8
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    baselines: dict[str, tuple[str, TrialResult]] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return self.home.root / "examiner" / "seals"

    def key_document(self) -> dict[str, Any]:
        document = {
            "kind": KEY_KIND,
            "wallet": self.wallet.id,
            "public_key": self.wallet.public_key.hex(),
            "key": self.key.public_key().public_bytes_raw().hex(),
            "suite": SUITE_NAME,
        }
        return {**document, "signature": base64.b64encode(self.wallet.sign(key_message(document))).decode()}

    @property
    def named(self) -> dict[str, str]:
        """How a seal's terms name this examiner."""
        return {"wallet": self.wallet.id, "key": self.key.public_key().public_bytes_raw().hex()}

    # -- a seal handed over -------------------------------------------------------------

    def receive(self, seal_id: str, ciphertext: bytes, log: str, seq: int) -> bytes:
        """Keeps a seal handed over encrypted to this examiner's key; the receipt it signs
        for the agent's log (`log`, as the examiner's `seq`-th entry there)."""
        if not seal_id.isalnum() or len(seal_id) != 16:
            raise ExaminerRefused(400, f"{seal_id[:40]!r} is not a seal id")
        try:
            plain = SUITE.decrypt(ciphertext, self.key, info=seal_info(seal_id))
        except (InvalidTag, ValueError):
            raise ExaminerRefused(
                400, f"the sealed tasks were not encrypted to this examiner's key for seal {seal_id}"
            ) from None
        path = self._path(seal_id)
        if path.exists():
            raise ExaminerRefused(409, f"seal {seal_id} was handed over already")
        self.folder.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        staged = path.with_suffix(".incoming")
        staged.write_bytes(plain)
        try:
            seal = open_seal(staged)
        except ImproverError as exc:
            staged.unlink()
            raise ExaminerRefused(400, f"what was handed over is not a whole seal: {exc}") from None
        if seal.id != seal_id or seal.terms.examiner != self.named:
            staged.unlink()
            raise ExaminerRefused(
                400, f"seal {seal.id} does not name this examiner (wallet {self.wallet.id}, this key)"
            )
        receipt = self._sign(EXAMINER_RECEIPT, {"seal": seal.id, "sealed_digest": seal.terms.sealed_digest}, log, seq)
        self._receipt_path(seal_id).write_bytes(receipt)
        os.replace(staged, path)
        return receipt

    # -- a change examined --------------------------------------------------------------

    async def examine(self, seal_id: str, request: dict[str, Any]) -> bytes:
        """Runs the change and the agent as it is on the seal's sealed tasks; the
        agent.examination/v1 entry it signs. Refused (nothing spent) past the seal's k."""
        seal = self._seal(seal_id)
        try:
            change, current = Variant.from_json(request["change"]), Variant.from_json(request["current"])
            runs, baseline_runs = int(request["runs"]), int(request["baseline_runs"])
            gain, seal_claim = float(request["gain"]), str(request["seal_claim"])
            log, seq = str(request["log"]), int(request["seq"])
        except (KeyError, TypeError, ValueError, ImproverError) as exc:
            raise ExaminerRefused(
                400, f"an examination needs change, current, runs, baseline_runs, gain, seal_claim, log and seq ({exc})"
            ) from None
        if not 1 <= runs <= baseline_runs <= 1000:
            raise ExaminerRefused(400, "runs must be from 1 to baseline_runs, at most 1000")
        async with self.locks.setdefault(seal_id, asyncio.Lock()):
            if seal.canary_in(f"{change.operator}\n{change.lessons}"):  # its code word proposed
                return self._sign(EXAMINATION, canary_examination(seal_claim, change, current, runs), log, seq)
            # The gate the agent cannot hold here: no sealed task's words in the change.
            if SealedText.of(seal.real_tasks).held_in(change.lessons):
                raise ExaminerRefused(
                    422,
                    "the change holds a sealed task's words (a run of eight, or what one asks): not examined, nothing spent",
                )
            trials = self._trials(seal)
            baseline = SealedBaseline(seal, trials, baseline_runs, self.baselines.get(seal_id))
            try:
                examined = await LocalExamination(seal, trials, baseline).examine(change, current, gain, runs)
            except CanaryPassed:
                return self._sign(EXAMINATION, canary_examination(seal_claim, change, current, runs), log, seq)
            except Stop as exc:
                raise ExaminerRefused(409, str(exc)) from None
            if baseline.last is not None:
                self.baselines[seal_id] = baseline.last
            body = examination_body(examined, seal_claim, change, current, runs)
            raw = self._sign(EXAMINATION, body, log, seq)
            with self._examinations_path(seal_id).open("ab") as out:
                out.write(raw + b"\n")
            return raw

    def state(self, seal_id: str) -> dict[str, Any]:
        """What an agent may know of a seal held here: its confirmations, the receipt and
        every examination signed (so one whose answer was lost can still be appended)."""
        seal = self._seal(seal_id)
        exams = self._examinations_path(seal_id)
        lines = exams.read_bytes().splitlines() if exams.exists() else []
        return {
            "seal": seal.id,
            "confirmations": seal.terms.confirmations,
            "spent": seal.state().spent,
            "receipt": self._receipt_path(seal_id).read_text(),
            "examinations": [line.decode() for line in lines],
        }

    def _trials(self, seal: Seal) -> Trials:
        return Trials(
            candidate=lambda _: AGENT,
            models=model_factory(self.home, self.models_dir),
            limits=self.limits,
            concurrency=self.concurrency,
            halted=lambda: None,
            left_as=LEFT_AS,
            canary_in=seal.canary_in,
        )

    def _seal(self, seal_id: str) -> Seal:
        path = self._path(seal_id)
        if not seal_id.isalnum() or not path.exists():
            raise ExaminerRefused(404, f"this examiner holds no seal {seal_id[:40]}")
        return open_seal(path)

    def _sign(self, kind: str, body: dict[str, Any], log: str, seq: int) -> bytes:
        try:
            return Entry.create(self.wallet, kind, body, log=log, seq=seq).raw
        except EntryError as exc:
            raise ExaminerRefused(400, str(exc)) from None

    def _path(self, seal_id: str) -> Path:
        return self.folder / f"{seal_id}.json"

    def _receipt_path(self, seal_id: str) -> Path:
        return self.folder / f"{seal_id}.receipt"

    def _examinations_path(self, seal_id: str) -> Path:
        return self.folder / f"{seal_id}.examinations"


def examiner_key(home: Home) -> X25519PrivateKey:
    """The home's examiner key, made on first use (a private file, like a wallet's)."""
    path = home.root / "examiner" / "x25519.key"
    if path.exists():
        return X25519PrivateKey.from_private_bytes(bytes.fromhex(path.read_text().strip()))
    path.parent.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    key = X25519PrivateKey.generate()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(key.private_bytes_raw().hex() + "\n")
    return key


def open_examiner(home: Home, wallet: Wallet, models_dir: Path | None = None) -> Examiner:
    home.ensure()
    return Examiner(home, wallet, examiner_key(home), models_dir)
