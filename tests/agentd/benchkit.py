"""The public benchmarks' packages, where the tests that import them need them."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

from improver.benchmarks import bfcl, tau2


def needs(*packages: str) -> pytest.MarkDecorator:
    """Skips unless the packages are installed; under AGENTD_REQUIRE_BENCHMARKS=1 (CI),
    where they must be, the tests run and fail without them."""
    required = os.environ.get("AGENTD_REQUIRE_BENCHMARKS") == "1"
    missing = [] if required else [p for p in packages if importlib.util.find_spec(p) is None]
    return pytest.mark.skipif(bool(missing), reason=f"not installed: {', '.join(missing)} (pip install --no-deps ...)")


def bfcl_rows(name: str) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """BFCL's own rows of set `name` and their possible answers, by id."""
    folder = bfcl.data_dir()
    rows = _by_id(folder / f"BFCL_v4_{name}.json")
    truths = {} if bfcl.SETS[name] else _by_id(folder / "possible_answer" / f"BFCL_v4_{name}.json")
    return rows, {i: r["ground_truth"] for i, r in truths.items()}


def tau2_rows(domain: str) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in json.loads((tau2.domain_dir(domain) / "tasks.json").read_text())}


def _by_id(path: Path) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in map(json.loads, path.read_text().splitlines()) if "id" in row}
