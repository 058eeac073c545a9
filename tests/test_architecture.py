"""ARCHITECTURE.md matches the tree: every module of the libraries has its row, in the
section of its package (or, for the improver, of its room), and no row names a module
that is not there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = (ROOT / "ARCHITECTURE.md").read_text()


def sections() -> dict[str, str]:
    """Each section's heading word (`ledger/`, `loop/`, ...) and its text."""
    parts = re.split(r"^#{2,3} (\S+)/ ", MAP, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def named(text: str) -> set[str]:
    """The modules a section's table rows name in their first cell."""
    cells = re.findall(r"^\| ([^|]+) \|", text, flags=re.M)
    return {m for cell in cells for m in re.findall(r"`([\w/]+)\.py`", cell)}


def modules(folder: Path) -> set[str]:
    return {p.stem for p in folder.glob("*.py") if p.name != "__init__.py"}


def test_every_module_of_ledger_sandbox_and_each_improver_room_has_its_row() -> None:
    found = sections()
    folders = {"ledger": ROOT / "ledger", "sandbox": ROOT / "sandbox"}
    folders |= {p.name: p for p in (ROOT / "improver").iterdir() if (p / "__init__.py").exists()}
    for name, folder in folders.items():
        assert name in found, f"ARCHITECTURE.md has no section for {name}/"
        assert named(found[name]) == modules(folder), name


def test_no_class_in_the_four_packages_is_over_250_lines() -> None:
    # A class that grows past this is doing two things; split it by what its callers do.
    long = []
    for package in ("agentd", "improver", "ledger", "sandbox"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef) and (size := node.end_lineno - node.lineno + 1) > 250:
                    long.append(f"{path.relative_to(ROOT)}: {node.name} is {size} lines")
    assert not long, "\n".join(long)
