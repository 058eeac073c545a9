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
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from agentd.app.agent import AGENT, model_factory
from agentd.app.keydocs import SUITE, checked_key_document, key_document, public_hex
from agentd.app.rebuilt import Rebuilt, patch_text, rebuild
from agentd.app.runners import sandbox_runner
from agentd.errors import AgentdError
from agentd.home import PRIVATE_DIR, Home
from improver import (
    EXAMINATION,
    EXAMINER_RECEIPT,
    SEAL_CLAIM,
    SEAL_RETIREMENT,
    SEAL_REVEAL,
    CanaryPassed,
    Candidate,
    EpisodeLimits,
    Examined,
    ImproverError,
    LocalExamination,
    Seal,
    SealedBaseline,
    SealedText,
    Stop,
    TrialResult,
    Trials,
    Variant,
    bundle_bytes,
    canary_examination,
    examination_body,
    open_seal,
)
from ledger import Entry, EntryError, Wallet

KEY_KIND = "agentd.examiner-key/v1"
LEFT_AS = "the examiner's seal is as its last finished examination left it"


class ExaminerRefused(AgentdError):
    """What the examiner will not do, said to whoever asked (an HTTP 4xx), with anything
    the asker needs to mend its request (`extra`, sent beside the error)."""

    def __init__(self, status: int, message: str, extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.extra = extra or {}


def seal_info(seal: str) -> bytes:
    """HPKE's info: binds a ciphertext to the one seal it was made for."""
    return f"agentd sealed tasks {seal}".encode()


def check_key_document(document: Any, wallet: str | None = None) -> dict[str, str]:
    """{wallet, key} of the examiner's key document whose signature holds (and, with
    `wallet`, made by that wallet); AgentdError naming what is wrong otherwise."""
    named = checked_key_document(document, KEY_KIND, "the examiner's")
    if wallet is not None and named["wallet"] != wallet:
        raise AgentdError(
            f"the examiner's key is published by wallet {named['wallet']}, not {wallet}, the examiner named"
        )
    return named


@dataclass
class Opened:
    """What every examination would otherwise read again, read once per process: a held
    seal (its tasks never change once received; its state is read from its file each
    time) with its sealed text indexed, and each signed examination's claim."""

    seals: dict[str, tuple[Seal, SealedText]] = field(default_factory=dict)
    claims: dict[bytes, str] = field(default_factory=dict)

    def seal(self, held: Held) -> tuple[Seal, SealedText]:
        if held.seal_id not in self.seals:
            if not held.seal_id.isalnum() or not held.seal.exists():
                raise ExaminerRefused(404, f"this examiner holds no seal {held.seal_id[:40]}")
            seal = open_seal(held.seal)
            self.seals[held.seal_id] = seal, SealedText.of(seal.real_tasks)
        return self.seals[held.seal_id]

    def claim(self, raw: bytes) -> str:
        if raw not in self.claims:
            self.claims[raw] = Entry.parse(raw).claim_id
        return self.claims[raw]


@dataclass
class Examiner:
    """One examiner's home: its wallet, its HPKE key, its models, the seals it holds."""

    home: Home
    wallet: Wallet
    key: X25519PrivateKey
    models_dir: Path | None = None  # where `script:` models are read from
    bond: str | None = None  # the bond on the agents' ledgers its receipts, and so its examinations, are issued on
    source: Path | None = None  # a checkout of the agents' code: code changes are rebuilt from it
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)
    concurrency: int = 8
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    rebuilds: int = 0
    baselines: dict[str, tuple[str, TrialResult]] = field(default_factory=dict)
    opened: Opened = field(default_factory=Opened)

    @property
    def folder(self) -> Path:
        return self.home.root / "examiner" / "seals"

    def key_document(self) -> dict[str, Any]:
        return key_document(KEY_KIND, self.wallet, self.key)

    @property
    def named(self) -> dict[str, str]:
        """How a seal's terms name this examiner."""
        return {"wallet": self.wallet.id, "key": public_hex(self.key)}

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
        path = self.held(seal_id).seal
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
        body = {
            "seal": seal.id,
            "sealed_digest": seal.terms.sealed_digest,
            **({"bond": self.bond} if self.bond else {}),
        }
        receipt = self._sign(EXAMINER_RECEIPT, body, log, seq)
        self.held(seal_id).receipt.write_bytes(receipt)
        os.replace(staged, path)
        return receipt

    # -- a change examined --------------------------------------------------------------

    async def examine(self, seal_id: str, request: dict[str, Any]) -> bytes:
        """Runs the change and the agent as it is on the seal's sealed tasks; the
        agent.examination/v1 entry it signs. Refused (nothing spent) past the seal's k,
        once the seal is retired, and while the asker's ledger lacks an examination signed
        before (sent back as `missing`, to append first: the new one's seq follows them)."""
        seal = self._seal(seal_id)
        try:
            change, current = Variant.from_json(request["change"]), Variant.from_json(request["current"])
            runs, baseline_runs = int(request["runs"]), int(request["baseline_runs"])
            gain, seal_claim = float(request["gain"]), str(request["seal_claim"])
            log, seq = str(request["log"]), int(request["seq"])
            known = {str(claim) for claim in request.get("held", [])}
        except (KeyError, TypeError, ValueError, ImproverError) as exc:
            raise ExaminerRefused(
                400, f"an examination needs change, current, runs, baseline_runs, gain, seal_claim, log and seq ({exc})"
            ) from None
        if not 1 <= runs <= baseline_runs <= 1000:
            raise ExaminerRefused(400, "runs must be from 1 to baseline_runs, at most 1000")
        asked = {"change": request["change"], "current": request["current"], "runs": runs}
        asked |= {"baseline_runs": baseline_runs, "gain": gain, "seal_claim": seal_claim}
        asked |= {"code": request["code"]} if "code" in request else {}
        async with self.locks.setdefault(seal_id, asyncio.Lock()):
            self._still_examines(seal_id)
            missing = [raw for raw in self.held(seal_id).signed() if self.opened.claim(raw) not in known]
            if "held" in request and missing:
                raise ExaminerRefused(
                    409,
                    f"{len(missing)} examination(s) signed before are not on the asker's ledger: append them, then ask",
                    {"missing": [raw.decode() for raw in missing]},
                )
            said = f"{change.operator}\n{change.lessons}\n{_patch_text(change, asked)}"
            if seal.canary_in(said):  # its code word proposed
                return self._record(seal_id, canary_examination(seal_claim, change, current, runs), asked, log, seq)
            # The gate the agent cannot hold here: no sealed task's words in the change.
            if self.opened.seal(self.held(seal_id))[1].held_in(said):
                raise ExaminerRefused(
                    422,
                    "the change holds a sealed task's words (a run of eight, or what one asks): not examined, nothing spent",
                )
            rebuilt = await self._rebuilt(seal_id, asked, change, current) if change.commit else None
            try:
                examined = await self._examined(seal, rebuilt, change, current, gain, runs, baseline_runs)
            finally:
                if rebuilt is not None:
                    rebuilt.close()
            if examined is None:
                return self._record(seal_id, canary_examination(seal_claim, change, current, runs), asked, log, seq)
            body = examination_body(examined, seal_claim, change, current, runs)
            return self._record(seal_id, body, asked, log, seq)

    async def _examined(
        self,
        seal: Seal,
        rebuilt: Rebuilt | None,
        change: Variant,
        current: Variant,
        gain: float,
        runs: int,
        baseline_runs: int,
    ) -> Examined | None:
        """What the sealed tasks say of the change; None when a canary was passed."""
        candidate = rebuilt.candidate if rebuilt else None
        trials = sealed_trials(self.home, self.models_dir, seal, self.limits, self.concurrency, candidate=candidate)
        baseline = SealedBaseline(seal, trials, baseline_runs, self.baselines.get(seal.id))
        try:
            examined = await LocalExamination(seal, trials, baseline).examine(change, current, gain, runs)
        except CanaryPassed:
            return None
        except Stop as exc:
            raise ExaminerRefused(409, str(exc)) from None
        if baseline.last is not None:
            self.baselines[seal.id] = baseline.last
        return examined

    async def _rebuilt(self, seal_id: str, asked: dict[str, Any], change: Variant, current: Variant) -> Rebuilt:
        """Both arms of a code change rebuilt from this examiner's checkout, in its sandbox."""
        if self.source is None:
            raise ExaminerRefused(
                409,
                "this examiner holds no checkout of the agent's code: it confirms lesson changes only",
            )
        self.rebuilds += 1
        root = self.home.root / "examiner" / "work" / f"{seal_id}-{self.rebuilds}"
        try:
            return await rebuild(sandbox_runner(self.home), self.source, root, asked, [current, change])
        except AgentdError as exc:
            raise ExaminerRefused(409, f"{exc}: not examined, nothing spent") from None

    def state(self, seal_id: str) -> dict[str, Any]:
        """What an agent may know of a seal held here: its confirmations, the receipt,
        every examination signed (so one whose answer was lost can still be appended), and
        whether it was retired and revealed."""
        seal, held = self._seal(seal_id), self.held(seal_id)
        return {
            "seal": seal.id,
            "confirmations": seal.terms.confirmations,
            "spent": seal.state().spent,
            "receipt": self.held(seal_id).receipt.read_text(),
            "examinations": [raw.decode() for raw in held.signed()],
            "retired": held.retired.exists(),
            "revealed": held.revealed.exists(),
        }

    # -- a seal retired and revealed ----------------------------------------------------

    async def reveal(self, seal_id: str, request: dict[str, Any]) -> tuple[bytes, bytes]:
        """Retires the seal and reveals it: the agent.seal-reveal/v1 entry it signs and the
        bundle (the seal file and every examination with what it was asked) whose digest
        that entry holds. Only once its confirmations are spent, or when its publisher asks
        (`retirement`: its agent.seal-retirement/v1 entry, beside `claim`, the seal's
        agent.seal/v1 entry, both signed by that publisher). Asked again, it answers the same."""
        seal = self._seal(seal_id)
        claim, retirement, log, seq = _reveal_asked(seal, request)
        held = self.held(seal_id)
        async with self.locks.setdefault(seal_id, asyncio.Lock()):  # no examination meanwhile
            if held.reveal.exists():
                return held.reveal.read_bytes(), held.revealed.read_bytes()
            if seal.state().spent < seal.terms.confirmations and retirement is None:
                raise ExaminerRefused(
                    409,
                    f"seal {seal.id} has confirmations left: it is revealed only once they are spent, or when its "
                    "publisher retires it (agentd improve reveal --retire)",
                )
            if retirement is not None:
                _check_retirement(retirement, claim)
            held.retired.write_bytes(retirement.raw if retirement else b"spent\n")
            signed = [self.opened.claim(raw) for raw in held.signed()]
            asked = held.asked()
            seal_file = json.loads(self.held(seal_id).seal.read_text())
            bundle = bundle_bytes(seal_file, [(claim_id, asked.get(claim_id, {})) for claim_id in signed])
            body = {
                "seal_claim": claim.claim_id,
                "sealed_digest": seal.terms.sealed_digest,
                "bundle": hashlib.sha256(bundle).hexdigest(),
                "examinations": signed,
            }
            raw = self._sign(SEAL_REVEAL, body, log, seq)
            held.revealed.write_bytes(bundle)
            held.reveal.write_bytes(raw)
            return raw, bundle

    def revealed(self, seal_id: str) -> bytes:
        """The bundle of a revealed seal: anyone may fetch and check it."""
        self._seal(seal_id)
        held = self.held(seal_id)
        if not held.revealed.exists():
            raise ExaminerRefused(404, f"seal {seal_id} is not revealed yet")
        return held.revealed.read_bytes()

    def _still_examines(self, seal_id: str) -> None:
        if self.held(seal_id).retired.exists():
            raise ExaminerRefused(409, f"seal {seal_id} was retired: it examines no more changes; seal fresh tasks")

    def _record(self, seal_id: str, body: dict[str, Any], asked: dict[str, Any], log: str, seq: int) -> bytes:
        """Signs an examination and keeps it with what it was asked, for the reveal."""
        raw = self._sign(EXAMINATION, body, log, seq)
        self.held(seal_id).keep(raw, asked)
        return raw

    def _seal(self, seal_id: str) -> Seal:
        return self.opened.seal(self.held(seal_id))[0]

    def _sign(self, kind: str, body: dict[str, Any], log: str, seq: int) -> bytes:
        try:
            return Entry.create(self.wallet, kind, body, log=log, seq=seq).raw
        except EntryError as exc:
            raise ExaminerRefused(400, str(exc)) from None

    def held(self, seal_id: str) -> Held:
        return Held(self.folder, seal_id)


@dataclass(frozen=True)
class Held:
    """The files an examiner keeps of one seal it holds: the seal, its receipt, every
    examination it signed and what each was asked, and its retirement and reveal."""

    folder: Path
    seal_id: str

    def _at(self, suffix: str) -> Path:
        return self.folder / f"{self.seal_id}.{suffix}"

    @property
    def seal(self) -> Path:
        return self._at("json")

    @property
    def receipt(self) -> Path:
        return self._at("receipt")

    @property
    def retired(self) -> Path:
        return self._at("retired")

    @property
    def reveal(self) -> Path:
        return self._at("reveal")

    @property
    def revealed(self) -> Path:
        return self._at("revealed")

    def keep(self, raw: bytes, asked: dict[str, Any]) -> None:
        """An examination signed, kept with what it was asked (what was asked first: an
        ask with no examination is left out of the reveal, never the other way round)."""
        with self._at("asked").open("a") as out:
            out.write(json.dumps({"claim": Entry.parse(raw).claim_id, "asked": asked}, sort_keys=True) + "\n")
        with self._at("examinations").open("ab") as out:
            out.write(raw + b"\n")

    def signed(self) -> list[bytes]:
        """Every examination signed on the seal, in order."""
        path = self._at("examinations")
        return path.read_bytes().splitlines() if path.exists() else []

    def asked(self) -> dict[str, dict[str, Any]]:
        """What each examination (by claim) was asked."""
        path = self._at("asked")
        lines = path.read_text().splitlines() if path.exists() else []
        return {record["claim"]: record["asked"] for record in map(json.loads, lines)}


def _patch_text(change: Variant, asked: dict[str, Any]) -> str:
    """A code change's patches as text, for the canaries' code words and the sealed words."""
    if not change.commit:
        return ""
    try:
        return patch_text(asked)
    except AgentdError as exc:
        raise ExaminerRefused(400, str(exc)) from None


def _reveal_asked(seal: Seal, request: dict[str, Any]) -> tuple[Entry, Entry | None, str, int]:
    """A reveal's request: the seal's claim entry, its publisher's retirement (if any),
    and the log and seq the reveal is signed for."""
    try:
        claim, log, seq = Entry.parse(str(request["claim"]).encode()), str(request["log"]), int(request["seq"])
        retirement = Entry.parse(str(request["retirement"]).encode()) if request.get("retirement") else None
    except (KeyError, TypeError, ValueError, EntryError) as exc:
        raise ExaminerRefused(400, f"a reveal needs claim (the seal's entry), log and seq ({exc})") from None
    if claim.kind != SEAL_CLAIM or claim.body.get("seal") != seal.id or claim.log != log:
        raise ExaminerRefused(400, f"claim is not seal {seal.id}'s agent.seal/v1 entry on log {log}")
    return claim, retirement, log, seq


def _check_retirement(retirement: Entry, claim: Entry) -> None:
    """A retirement that holds: the seal's publisher retiring that very seal claim."""
    if (
        retirement.kind != SEAL_RETIREMENT
        or retirement.author != claim.author
        or retirement.log != claim.log
        or retirement.body.get("seal_claim") != claim.claim_id
    ):
        raise ExaminerRefused(
            403,
            f"the retirement is not seal {claim.body.get('seal')}'s publisher ({claim.author}) retiring its claim",
        )


def sealed_trials(
    home: Home,
    models_dir: Path | None,
    seal: Seal,
    limits: EpisodeLimits,
    concurrency: int,
    progress: Callable[[str], None] | None = None,
    left_as: str = LEFT_AS,
    candidate: Callable[[Variant], Candidate] | None = None,
) -> Trials:
    """Trials on a seal's sealed tasks with this home's models (and `script:` models from
    `models_dir`), every answer held against its canaries; each variant runs as the agent
    in this process, or as `candidate` gives it (a code change's built program)."""
    return Trials(
        candidate=candidate or (lambda _: AGENT),
        models=model_factory(home, models_dir),
        limits=limits,
        concurrency=concurrency,
        halted=lambda: None,
        left_as=left_as,
        progress=progress,
        canary_in=seal.canary_in,
    )


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


def open_examiner(
    home: Home, wallet: Wallet, models_dir: Path | None = None, bond: str | None = None, source: Path | None = None
) -> Examiner:
    home.ensure()
    return Examiner(home, wallet, examiner_key(home), models_dir=models_dir, bond=bond, source=source)
