"""Ed25519 wallets: signing keys, their ids, signature checks, and key files at rest.

A wallet's id is the hex of the first 16 bytes of SHA-256 over its raw public key. Key
files are JSON (mode 0600, created whole, replaced only to seal them); the 32-byte
private seed is either sealed with scrypt (n=2**17, r=8, p=1: 128 MiB and a third of a
second to open, as current guidance asks; files sealed at n=2**15 before still open) and
ChaCha20-Poly1305, or, when no passphrase is given, stored as is so that unattended
processes can use it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from ledger.errors import LedgerError

KEY_FILE_FORMAT = "agentd-wallet/v1"
SCRYPT = {"n": 2**17, "r": 8, "p": 1}
# The costliest parameters a key file may ask for: more would take minutes or gigabytes.
MAX_SCRYPT_N = 2**20


def wallet_id(public_key: bytes) -> str:
    return hashlib.sha256(public_key).digest()[:16].hex()


class Wallet:
    """An Ed25519 signing key with a name; its id derives from the public key."""

    __slots__ = ("_key", "id", "name", "public_key")

    def __init__(self, key: Ed25519PrivateKey, name: str = "") -> None:
        self._key = key
        self.name = name
        self.public_key: bytes = key.public_key().public_bytes_raw()
        self.id: str = wallet_id(self.public_key)

    @classmethod
    def generate(cls, name: str = "") -> Wallet:
        return cls(Ed25519PrivateKey.generate(), name)

    @classmethod
    def from_seed(cls, seed: bytes, name: str = "") -> Wallet:
        if len(seed) != 32:
            raise LedgerError(f"an Ed25519 seed is 32 bytes, not {len(seed)}")
        return cls(Ed25519PrivateKey.from_private_bytes(seed), name)

    @property
    def seed(self) -> bytes:
        return self._key.private_bytes_raw()

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message)

    def __repr__(self) -> str:
        return f"Wallet(name={self.name!r}, id={self.id!r})"


@lru_cache(maxsize=4096)
def _public_key(raw: bytes) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(raw)


def signature_holds(public_key: bytes, signature: bytes, message: bytes) -> bool:
    """True when `signature` is the key's Ed25519 signature of `message`."""
    try:
        _public_key(public_key).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


class KeyFileExists(LedgerError):
    """A key file is already at the path: another wallet, or another process got there first."""


@dataclass(frozen=True)
class KeyFile:
    """What a key file says in the clear: enough to list and show a wallet."""

    path: Path
    name: str
    id: str
    public_key: bytes
    encrypted: bool


def write_key_file(path: Path, wallet: Wallet, passphrase: str | None) -> None:
    """Creates the wallet's key file, whole and with mode 0600; KeyFileExists if there is
    one already, even when another process creates it at the same moment."""
    if path.exists():
        raise KeyFileExists(f"{path} already exists; refusing to overwrite a key")
    create_private(path, _document(wallet, passphrase))


def seal_key_file(path: Path, passphrase: str) -> None:
    """Replaces an unencrypted key file by one sealed with `passphrase`, whole: a reader
    sees the old file or the new one, never a part."""
    if read_key_file(path).encrypted:
        raise LedgerError(f"{path} is sealed already")
    wallet = open_key_file(path, None)
    staged = path.with_name(f".{path.name}.{secrets.token_hex(6)}.sealed")
    create_private(staged, _document(wallet, passphrase))
    try:
        os.replace(staged, path)
    except OSError as exc:
        staged.unlink(missing_ok=True)
        raise LedgerError(f"cannot replace {path}: {exc.strerror}") from None


def _document(wallet: Wallet, passphrase: str | None) -> bytes:
    seed = _seal(wallet, passphrase) if passphrase else {"plain": b64(wallet.seed)}
    doc = {
        "format": KEY_FILE_FORMAT,
        "name": wallet.name,
        "id": wallet.id,
        "public_key": b64(wallet.public_key),
        "seed": seed,
    }
    return json.dumps(doc, indent=2).encode() + b"\n"


def read_key_file(path: Path) -> KeyFile:
    doc = _load(path)
    return KeyFile(path, doc["name"], doc["id"], _unb64(doc["public_key"], path), "plain" not in doc["seed"])


def open_key_file(path: Path, passphrase: str | None) -> Wallet:
    """Loads the wallet in a key file; a sealed seed needs its passphrase."""
    doc = _load(path)
    seed = doc["seed"]
    if "plain" in seed:
        raw = _unb64(seed["plain"], path)
    elif passphrase is None:
        raise LedgerError(f"{path} is encrypted: opening it needs its passphrase")
    else:
        raw = _unseal(seed, passphrase, doc["id"], path)
    try:
        wallet = Wallet.from_seed(raw, doc["name"])
    except (LedgerError, ValueError):
        raise LedgerError(f"{path} is corrupt: its seed is not an Ed25519 key") from None
    if wallet.id != doc["id"] or wallet.public_key != _unb64(doc["public_key"], path):
        raise LedgerError(f"{path} is corrupt: its seed does not match the public key it names")
    return wallet


def create_private(path: Path, data: bytes) -> None:
    """Creates a secret file whole: a 0600 temp file in the same directory, then a hard
    link to `path`, which, unlike a rename, fails if `path` exists. Of two processes
    creating the same key file at once, one gets KeyFileExists; neither replaces the other's."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise LedgerError(f"cannot create {path}: {exc.strerror}") from None
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)
    except FileExistsError:
        raise KeyFileExists(f"{path} already exists; refusing to overwrite a key") from None
    except OSError as exc:
        raise LedgerError(f"cannot create {path}: {exc.strerror}") from None
    finally:
        Path(tmp).unlink(missing_ok=True)


def _seal(wallet: Wallet, passphrase: str) -> dict[str, Any]:
    salt, nonce = os.urandom(16), os.urandom(12)
    key = _derive(passphrase, salt, SCRYPT)
    # The id is bound as associated data so a seed cannot be moved under another name's id.
    sealed = ChaCha20Poly1305(key).encrypt(nonce, wallet.seed, wallet.id.encode())
    return {
        "kdf": "scrypt",
        **SCRYPT,
        "salt": b64(salt),
        "cipher": "chacha20-poly1305",
        "nonce": b64(nonce),
        "ciphertext": b64(sealed),
    }


def _unseal(seed: dict[str, Any], passphrase: str, wid: str, path: Path) -> bytes:
    try:
        params = {k: int(seed[k]) for k in ("n", "r", "p")}
        if seed["kdf"] != "scrypt" or seed["cipher"] != "chacha20-poly1305":
            raise LedgerError(f"{path} uses an unknown kdf or cipher")
        if not (2 <= params["n"] <= MAX_SCRYPT_N and params["r"] <= 32 and params["p"] <= 16):
            raise LedgerError(f"{path} asks for scrypt parameters beyond what a key file may use")
        key = _derive(passphrase, _unb64(seed["salt"], path), params)
        return ChaCha20Poly1305(key).decrypt(
            _unb64(seed["nonce"], path), _unb64(seed["ciphertext"], path), wid.encode()
        )
    except InvalidTag:
        raise LedgerError(f"wrong passphrase for {path}") from None
    except (KeyError, TypeError, ValueError):
        raise LedgerError(f"{path} is corrupt: its sealed seed is incomplete") from None


def _derive(passphrase: str, salt: bytes, params: dict[str, int]) -> bytes:
    return Scrypt(salt=salt, length=32, **params).derive(passphrase.encode())


def _load(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise LedgerError(f"{path} does not exist") from None
    except OSError as exc:
        raise LedgerError(f"cannot read {path}: {exc.strerror}") from None
    except (ValueError, UnicodeDecodeError):
        raise LedgerError(f"{path} is corrupt: not a JSON key file") from None
    fields = ("name", "id", "public_key", "seed")
    if (
        not isinstance(doc, dict)
        or doc.get("format") != KEY_FILE_FORMAT
        or not all(k in doc for k in fields)
        or not isinstance(doc["seed"], dict)
        or not all(isinstance(doc[k], str) for k in fields[:3])
    ):
        raise LedgerError(f"{path} is corrupt: not an {KEY_FILE_FORMAT} key file")
    return doc


def b64(data: bytes) -> str:
    """Bytes as standard base64 text, as key files, proofs and checkpoints write them."""
    return base64.b64encode(data).decode()


def _unb64(text: Any, path: Path) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (TypeError, ValueError):
        raise LedgerError(f"{path} is corrupt: bad base64") from None
