"""A witness: a key that cosigns a log's checkpoints only after checking that the log
grew by appends alone since the last checkpoint it cosigned.

It keeps, in a directory of its own, its key (witness-key.json, sealed when given a
passphrase; its name is the witness's name on the cosignatures) and, per log it has
seen, the log's key and the last checkpoint it cosigned (logs/<hash of the origin>.json).
The first checkpoint of a log is taken on trust, with the log's key given by whoever
runs the witness. Every later one must come with a consistency proof from the last; a
checkpoint older than the last is refused, and one that contradicts it is refused with
a fork proof (see ledger.forks) that anyone holding the log's key can check. Cosigning
holds a lock on the directory, so two requests at once cannot both move the witness on.
Cosignatures are in the C2SP tlog-cosignature format (see ledger.cosignature).
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ledger import checkpoint as notes, cosignature
from ledger.errors import LedgerError
from ledger.forks import ForkProof
from ledger.keys import Wallet, b64, open_key_file, read_key_file, write_key_file
from ledger.merkle import ProofError
from ledger.proofs import ConsistencyProof

KEY_FILE = "witness-key.json"
# A witness's name goes on signature lines: no space, no "+".
NAME = re.compile(r"[!-*,-~]{1,200}")


class WitnessError(LedgerError):
    """The witness will not cosign; the message says why and what would do."""


class Forked(WitnessError):
    """The checkpoint contradicts the last one this witness cosigned: `proof` shows it."""

    def __init__(self, message: str, proof: ForkProof) -> None:
        super().__init__(message)
        self.proof = proof


@dataclass(frozen=True)
class Seen:
    """What a witness holds of one log: its key and the last checkpoint it cosigned."""

    origin: str
    log_key: bytes
    note: str

    @property
    def checkpoint(self) -> notes.Checkpoint:
        return notes.parse(self.note)


class Witness:
    def __init__(self, directory: Path, key: Wallet) -> None:
        self.directory = directory
        self.key = key

    @property
    def name(self) -> str:
        return self.key.name

    @property
    def vkey(self) -> str:
        """The verifier key auditors give to `verify` to count this witness's cosignatures."""
        return cosignature.vkey(self.name, self.key.public_key)

    @classmethod
    def create(cls, directory: Path, name: str | None, passphrase: str | None) -> Witness:
        """A new witness in `directory`, named `name` (default agentd.witness/<key id>)."""
        key = Wallet.generate()
        name = name or f"agentd.witness/{key.id}"
        if not NAME.fullmatch(name):
            raise WitnessError(f"bad witness name {name!r}: printable ASCII without spaces or '+', like example.org/w1")
        key = Wallet.from_seed(key.seed, name)
        write_key_file(directory / KEY_FILE, key, passphrase)
        return cls(directory, key)

    @classmethod
    def open(cls, directory: Path, passphrase: str | None) -> Witness:
        path = directory / KEY_FILE
        if not path.exists():
            raise WitnessError(f"no witness in {directory}: create one first")
        if read_key_file(path).encrypted and passphrase is None:
            raise WitnessError(f"{path} is sealed: opening it needs its passphrase")
        return cls(directory, open_key_file(path, passphrase))

    def logs(self) -> list[Seen]:
        """Every log this witness has cosigned for, by origin."""
        found = [self._read(path) for path in sorted((self.directory / "logs").glob("*.json"))]
        return sorted(found, key=lambda seen: seen.origin)

    def seen(self, origin: str) -> Seen | None:
        path = self._path(origin)
        return self._read(path) if path.exists() else None

    def cosign(
        self, note: str, proof: ConsistencyProof | None = None, log_key: bytes | None = None, now: float | None = None
    ) -> str:
        """`note` with this witness's cosignature, once the checkpoint is shown to extend
        the last one cosigned for its log; WitnessError (Forked) saying why not."""
        checkpoint = notes.parse(note)
        with self._locked():
            seen = self.seen(checkpoint.origin)
            key = self._log_key(checkpoint.origin, seen, log_key)
            notes.verify(note, key, checkpoint.origin)
            if seen is not None:
                self._extends(seen, note, checkpoint, proof)
            cosigned = cosignature.cosign(note, self.key, self.name, int(time.time() if now is None else now))
            self._write(Seen(checkpoint.origin, key, cosigned))
        return cosigned

    def _log_key(self, origin: str, seen: Seen | None, given: bytes | None) -> bytes:
        if seen is None:
            if given is None:
                raise WitnessError(
                    f"this witness has not seen log {origin}: give the log's key to trust its first checkpoint by"
                )
            return given
        if given is not None and given != seen.log_key:
            raise WitnessError(f"the key given for log {origin} is not the one this witness has held for it")
        return seen.log_key

    @staticmethod
    def _extends(seen: Seen, note: str, checkpoint: notes.Checkpoint, proof: ConsistencyProof | None) -> None:
        last = seen.checkpoint
        if checkpoint.size < last.size:
            raise WitnessError(
                f"the checkpoint of size {checkpoint.size} is older than the last this witness cosigned for "
                f"{checkpoint.origin} (size {last.size}): a witness only moves forward"
            )
        if checkpoint.size == last.size:
            if checkpoint.root != last.root:
                raise Forked(_forked(checkpoint, last), ForkProof(seen.note, note, checkpoint.root, []))
            return
        if proof is None:
            raise WitnessError(f"cosigning needs a consistency proof from size {last.size} to size {checkpoint.size}")
        if (proof.old_size, proof.new_size, proof.new_root) != (last.size, checkpoint.size, checkpoint.root):
            raise WitnessError(
                f"the consistency proof runs from size {proof.old_size} to {proof.new_size}, not from the last "
                f"checkpoint cosigned (size {last.size}) to this one (size {checkpoint.size})"
            )
        try:
            proof.verify()
        except ProofError as exc:
            raise WitnessError(f"the consistency proof does not hold: {exc}") from None
        if proof.old_root != last.root:
            raise Forked(_forked(checkpoint, last), ForkProof(seen.note, note, proof.old_root, proof.path))

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / "witness.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _path(self, origin: str) -> Path:
        return self.directory / "logs" / f"{hashlib.sha256(origin.encode()).hexdigest()[:32]}.json"

    def _write(self, seen: Seen) -> None:
        path = self._path(seen.origin)
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"origin": seen.origin, "log_key": b64(seen.log_key), "checkpoint": seen.note}
        staged = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            with open(staged, "w") as f:
                json.dump(doc, f, indent=2)
                f.flush()
                os.fsync(f.fileno())
            os.replace(staged, path)
        except OSError as exc:
            staged.unlink(missing_ok=True)
            raise WitnessError(f"cannot record what the witness saw in {path}: {exc.strerror}") from None

    @staticmethod
    def _read(path: Path) -> Seen:
        try:
            doc = json.loads(path.read_text())
            seen = Seen(doc["origin"], base64.b64decode(doc["log_key"], validate=True), doc["checkpoint"])
            notes.parse(seen.note)
        except (OSError, ValueError, KeyError, TypeError, binascii.Error, LedgerError):
            raise WitnessError(f"{path} is not a witness's record of a log: restore it from a backup") from None
        return seen


def _forked(checkpoint: notes.Checkpoint, last: notes.Checkpoint) -> str:
    return (
        f"refusing to cosign: the checkpoint of size {checkpoint.size} of {checkpoint.origin} does not extend the one "
        f"of size {last.size} this witness cosigned: the log forked"
    )
