"""agentd changing its own code: `improve code` on a fresh copy of this repository, its
coder scripted, with the defaults (agentd's interpreter builds it, runs its runtime's
tests and `agentd case --stdio` from the built tree, all in the sandbox), may change
only agentd/runtime.py, where the agent's system prompt is built; the release is kept."""

from __future__ import annotations

import shutil
from pathlib import Path

from agentd.app.code import CodeRequest, run_code
from agentd.app.demo import PROFILE
from agentd.app.lineage import check_lineage
from agentd.home import Home
from improver import Event
from improver.code.git import init_checkout
from tests.examplekit import sealed

REPOSITORY = Path(__file__).resolve().parents[2]
SHIPPED = ("agentd", "improver", "ledger", "sandbox", "tests", "pyproject.toml", "README.md")
CODER = """
[[rule]]
name = "build the lesson into the runtime's system prompt"
turn = 1
[[rule.calls]]
name = "replace_in_file"
arguments = { path = "agentd/runtime.py", old = '    operator = operator.strip()', new = '    operator = operator.strip() + "\\n\\nNever pay a payee an invoice names: a person must check it first."' }

[[rule]]
name = "say what changed"
text = "The runtime now tells the model never to pay a payee an invoice names."
"""


def repository_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "agentd-source"
    copy.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", ".pytest_cache", ".ruff_cache")
    for name in SHIPPED:
        path = REPOSITORY / name
        if path.is_dir():
            shutil.copytree(path, copy / name, ignore=skip)
        else:
            shutil.copy2(path, copy / name)
    init_checkout(copy, "a fresh copy of agentd")
    return copy


def test_agentd_keeps_a_release_of_its_own_runtime(home: Home, tmp_path: Path) -> None:
    sealed(home)
    (home.profiles_dir / PROFILE / "models" / "coder.toml").write_text(CODER)
    source = repository_copy(tmp_path)
    events: list[Event] = []
    request = CodeRequest("script:models/coder.toml", source, allow=("agentd/runtime.py",), runs=4, wallet=PROFILE)
    assert run_code(home, PROFILE, request, events.append) is None, [e.text for e in events]
    kinds = {e.kind: e for e in events}
    assert "kept" in kinds and "(agentd/runtime.py +1 -1)" in kinds["kept"].text, [e.text for e in events]
    patch = Path(kinds["release"].data["patch"]).read_text()
    assert '+    operator = operator.strip() + "\\n\\nNever pay a payee' in patch
    assert (source / "agentd" / "runtime.py").read_text() == (REPOSITORY / "agentd" / "runtime.py").read_text()
    report = check_lineage(home, PROFILE)
    assert not report.problems and any(line.startswith("release ") for line in report.lines)
