"""The README, run as written: every ```sh block of README.md, in order, as one bash script
(`set -euo pipefail`) in a fresh temporary folder, as a new user would type them.

The folder is the script's working directory and its HOME, and AGENTD_HOME is `~/.agentd`
in it: a fresh home, and the default one, so the README's `~/.agentd/...` paths are that
home. `agentd` and `python3` on PATH are this interpreter's. Before each block a line
`== README.md line N` goes to stderr, so a failure names the block it stopped in. It needs
what CI has: the PostgreSQL at 127.0.0.1:5432 (database `test`, the workers' queue),
bubblewrap and Docker (`sandbox check` on both), git, curl and systemd-analyze, and ports
8470 and 8471 free (the daemon's and the examiner's, as the README gives them).

A block is left out only when the HTML comment right before it says so, and why:
`<!-- not run by the README test: REASON -->`, REASON one of REASONS: a network model, a
package or a system service installed (the set-up commands, the service's unit), or the
test suite itself (it would run this test again).

The run must exit 0 with no "Traceback" in anything it printed. Where the README shows what
a block prints, in a plain ``` block after it under the same heading, the lines shown must
be among those that block printed (stdout and stderr), ids (hex of 8 digits or more), times,
task numbers, ports and the temporary folder (shown as `~`) aside, `…` or `...` standing
for anything. SHOWN names the output blocks held to that, by a text of their first line:
the seal, the loop, practice tasks and the loop chosen beside them, the challenger's
variants in the lineage, the improver improved, the code loop, an attestation, an in-toto
statement checked, a challenge's rebuild, an install. The rest are examples the prose
gives (the demo's lines, refusals), not what the block before them prints.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
SKIP = re.compile(r"<!-- not run by the README test: (?P<why>.+?) -->")
REASONS = ("needs a network model", "installs packages", "installs a system service", "runs the test suite")
FENCE = re.compile(r"^ *```(?P<lang>\w*)\s*$")
SHOWN = (
    "sealed 6 of 12 tasks for profile invoices",
    "the agent as it is: 48/96 runs of the tasks to choose on passed",
    "script:models/writer.toml wrote 4 tasks",
    "the agent as it is: 24/56 runs of the tasks to choose on passed",
    "on 2 variants the challenger wrote",
    "the improver as it is (",
    "the code as it stands (",
    "attested release ",
    "signed by ",
    "the attestation claimed the release holds up",
    "attestation ",
)
MARKER = re.compile(r"== README\.md line (\d+)\n")


@dataclass(frozen=True)
class Block:
    line: int  # of its opening fence, 1-based
    lang: str
    code: str
    skipped: str | None  # why, when the README leaves it out of the run
    heading: int  # the line of the heading it is under


def blocks(text: str) -> list[Block]:
    """Every fenced block of the README, in order, with what the comment before it says."""
    found: list[Block] = []
    lines = text.splitlines()
    heading, i = 0, 0
    while i < len(lines):
        if lines[i].startswith("#"):
            heading = i + 1
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        skip = SKIP.search(before)
        indent = len(lines[i]) - len(lines[i].lstrip())  # a block in a list item, as it reads
        code = "\n".join(line[indent:] for line in lines[i + 1 : end])
        found.append(Block(i + 1, fence["lang"], code, skip["why"] if skip else None, heading))
        i = end + 1
    return found


def script(run: list[Block]) -> str:
    """The blocks as one bash script, each after a line on stderr naming it."""
    parts = ["set -euo pipefail"]
    for block in run:
        parts += [f"echo '== README.md line {block.line}' >&2", block.code]
    return "\n".join(parts) + "\n"


def shown(found: list[Block]) -> list[tuple[Block, Block]]:
    """(the sh block, the output it shows) for each output block SHOWN names."""
    held = []
    for k, block in enumerate(found):
        first = block.code.splitlines()[0] if block.code else ""
        if block.lang or not any(text in first for text in SHOWN):
            continue
        ran = next((b for b in reversed(found[:k]) if b.lang == "sh"), None)
        if ran is not None and ran.heading == block.heading and not ran.skipped:
            held.append((ran, block))
    return held


def normal(text: str, folder: Path) -> str:
    """Ids, times, task numbers, ports and where the run happened, aside."""
    text = text.replace(str(folder), "~").replace("/root/", "~/")
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?", "TIME", text)
    text = re.sub(r"\b(work|talk|practice|canary)-\d+\b", r"\1-N", text)
    text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)
    return re.sub(r"\b[0-9a-f]{8,}\b", "ID", text)


def printed(output: str) -> dict[int, str]:
    """What each block printed, by its README line."""
    parts = MARKER.split(output)
    return {int(parts[k]): parts[k + 1] for k in range(1, len(parts), 2)}


def missing(shown_text: str, output: str, folder: Path) -> list[str]:
    """The lines of `shown_text` not among those of `output`; an elision matches anything."""
    text = normal(output, folder)
    absent = []
    for line in normal(shown_text, folder).splitlines():
        pattern = ".*?".join(re.escape(part.strip()) for part in re.split(r"…|\.\.\.", line))
        if line.strip() and not re.search(pattern, text):
            absent.append(line)
    return absent


def test_only_the_reasons_taken_leave_a_block_out() -> None:
    found = blocks(README.read_text())
    for block in found:
        assert block.skipped is None or block.skipped.startswith(REASONS), (
            f"README line {block.line} is left out of the run for a reason the test does not take: {block.skipped}"
        )
    checked = [out.code.splitlines()[0] for _, out in shown(found)]
    for text in SHOWN:
        assert any(text in first for first in checked), f"no output block after a block the test runs starts {text!r}"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_readme_runs_as_written(tmp_path: Path) -> None:
    found = blocks(README.read_text())
    run = [b for b in found if b.lang == "sh" and not b.skipped]
    # A new user's shell: none of agentd's settings, passphrases or provider keys of this one.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTD_", "OPENAI_", "ANTHROPIC_"))}
    env |= {
        "HOME": str(tmp_path),
        "AGENTD_HOME": str(tmp_path / ".agentd"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    process = subprocess.Popen(
        ["bash", "-c", script(run)],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=840)
    finally:
        # What a block left running in the background (a daemon it never stopped) goes too.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0, output[-8000:]
    assert "Traceback" not in output, output[output.index("Traceback") - 3000 :][:8000]
    by_block = printed(output)
    for ran, out in shown(found):
        absent = missing(out.code, by_block[ran.line], tmp_path)
        assert not absent, f"README line {out.line}: not printed by the block at line {ran.line}: {absent}"
