"""agentd reaches the layers below only through their public surfaces (each package's
__init__ and its __all__), never into their modules."""

from __future__ import annotations

import ast
from pathlib import Path

import agentd
import improver
import ledger
import sandbox

BELOW = {"improver": improver, "ledger": ledger, "sandbox": sandbox}


def imports_below(path: Path) -> list[tuple[int, str, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, "") for alias in node.names]
    return [(line, module, name) for line, module, name in found if module.split(".")[0] in BELOW]


def test_agentd_uses_only_the_public_names_of_the_layers_below() -> None:
    wrong = []
    for path in sorted(Path(agentd.__file__).parent.rglob("*.py")):
        for line, module, name in imports_below(path):
            package = BELOW[module.split(".")[0]]
            if module != package.__name__ or name not in package.__all__:
                wrong.append(f"{path}:{line}: {module} {name}")
    assert not wrong, "\n".join(wrong)
