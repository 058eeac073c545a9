"""Key documents: an X25519 key for HPKE (RFC 9180) published in a document its wallet
signs, so that whoever encrypts to the key knows whose it is. The examiner publishes one
for the seals handed to it (agentd/app/examiner.py); a worker trusted with sealed tasks
publishes one on the trial queue for the runs it claims (agentd/app/queuesealing.py).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from cryptography.hazmat.primitives import hpke
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from agentd.errors import AgentdError
from ledger import Wallet, signature_holds, wallet_id

SUITE = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)
SUITE_NAME = "DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305"


def public_hex(key: X25519PrivateKey) -> str:
    """The public half of `key`, in hex, as key documents and envelopes name it."""
    return key.public_key().public_bytes_raw().hex()


def key_message(document: dict[str, Any]) -> bytes:
    """What the wallet signs of its key document: its fields but the signature, in one
    byte form (sorted keys, no spaces)."""
    fields = {k: v for k, v in document.items() if k != "signature"}
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


def key_document(kind: str, wallet: Wallet, key: X25519PrivateKey, **more: str) -> dict[str, Any]:
    """`key`'s public half in a document of `kind` (with `more` fields), signed by `wallet`."""
    document = {
        "kind": kind,
        "wallet": wallet.id,
        "public_key": wallet.public_key.hex(),
        "key": public_hex(key),
        "suite": SUITE_NAME,
        **more,
    }
    return {**document, "signature": base64.b64encode(wallet.sign(key_message(document))).decode()}


def checked_key_document(document: Any, kind: str, whose: str) -> dict[str, str]:
    """{wallet, key} of a key document of `kind` whose signature holds; AgentdError naming
    what is wrong otherwise (`whose` says whose it was said to be: "the examiner's")."""
    if not isinstance(document, dict) or document.get("kind") != kind:
        raise AgentdError(f"what {whose} key is said to be is not an {kind} document")
    try:
        public = bytes.fromhex(document["public_key"])
        key = bytes.fromhex(document["key"])
        signature = base64.b64decode(document["signature"], validate=True)
        X25519PublicKey.from_public_bytes(key)
    except (KeyError, TypeError, ValueError) as exc:
        raise AgentdError(f"{whose} key document is malformed ({exc})") from None
    if document.get("wallet") != wallet_id(public) or not signature_holds(public, signature, key_message(document)):
        raise AgentdError(f"{whose} key document is not signed by the wallet it names: refusing its key")
    return {"wallet": document["wallet"], "key": key.hex()}
