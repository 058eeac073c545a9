"""Seals: the split into tasks to choose on and sealed tasks, the separation rules that
keep them apart, the ledger rules for every claim the improver makes, and the
improver's own settings.

What other rooms and the face use; names load on first use (improver.base.faces).
"""

from __future__ import annotations

from improver.base.faces import lazy

_SURFACE = {
    "ATTESTATION": "claims",
    "attestation_of": "claims",
    "EXAMINATION": "claims",
    "examination_of": "claims",
    "examinations_on": "claims",
    "seal_record": "claims",
    "RECEIPT": "claims",
    "RETIREMENT": "claims",
    "SEAL": "claims",
    "REVEAL": "claims",
    "bundle_bytes": "reveal",
    "read_revealed": "reveal",
    "Revealed": "reveal",
    "IMPROVEMENT": "claims",
    "IMPROVER": "claims",
    "register": "claims",
    "RELEASE": "claims",
    "release_claim_of": "claims",
    "claim_body": "seal",
    "Confirmation": "seal",
    "code_word": "seal",
    "current_seal": "seal",
    "hand_over": "seal",
    "is_canary": "seal",
    "make_seal": "seal",
    "open_seal": "seal",
    "Seal": "seal",
    "SealRequest": "seal",
    "seals_of": "seal",
    "SealSpent": "seal",
    "ShownTasks": "seal",
    "LEFT_OUT": "separation",
    "seal_claims": "separation",
    "Separation": "separation",
    "describe_change": "settings",
    "FILE": "settings",
    "load_settings": "settings",
    "save_settings": "settings",
    "Settings": "settings",
    "settings_text": "settings",
    "TUNABLE": "settings",
}

__all__ = sorted(_SURFACE)
__getattr__, __dir__ = lazy(__name__, _SURFACE)
