"""Third parties: a release rebuilt and attested by someone else, installed only when
the installer's own checks hold, releases and attestations as in-toto statements,
and the lineage audited against the ledger.

What other rooms and the face use; names load on first use (improver.base.faces).
"""

from __future__ import annotations

from improver.base.faces import lazy

_SURFACE = {
    "Finding": "attest",
    "load_sealed": "attest",
    "Setup": "attest",
    "check": "audit",
    "check_improvers": "audit",
    "Report": "audit",
    "install_release": "install",
    "installed": "install",
    "LEAST_BOND": "install",
    "Review": "install",
    "review": "install",
    "Trust": "install",
    "undo_install": "install",
    "ATTESTATION_PREDICATE": "intoto",
    "BadStatement": "intoto",
    "envelope": "intoto",
    "RELEASE_PREDICATE": "intoto",
    "statement": "intoto",
    "Verified": "intoto",
    "verify": "intoto",
}

__all__ = sorted(_SURFACE)
__getattr__, __dir__ = lazy(__name__, _SURFACE)
