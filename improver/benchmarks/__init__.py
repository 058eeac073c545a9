"""Public benchmarks as agentd tasks: BFCL (bfcl.py) and τ²-bench (tau2.py, its domains
run as worlds by tau2world.py), read from their installed packages (packages.py), and
their authors' own scorers beside agentd's checks (agreement.py).

What other rooms and the face use; names load on first use (improver.base.faces).
"""

from __future__ import annotations

from improver.base.faces import lazy

_SURFACE = {
    "bfcl_verdict": "agreement",
    "tau2_verdict": "agreement",
    "variants": "agreement",
    "import_set": "bfcl",
    "SETS": "bfcl",
    "set_problem": "bfcl",
    "Imported": "packages",
    "PACKAGES": "packages",
    "Skipped": "packages",
    "domain_problem": "tau2",
    "import_domain": "tau2",
    "DOMAINS": "tau2world",
}

__all__ = sorted(_SURFACE)
__getattr__, __dir__ = lazy(__name__, _SURFACE)
