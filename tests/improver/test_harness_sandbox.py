"""A malicious candidate, run through the harness on a sealed task: it finds nothing of
the harness's secrets or the task's files, and whatever it does, its run is *failed*
(its own doing), never errored, and never passes."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pytest

from improver.base.protocol import EpisodeLimits
from improver.base.variant import Variant
from improver.episodes.harness import Command, RunResult, run_task
from improver.seals.seal import make_canary
from sandbox.choose import make_runner
from sandbox.runner import Limits as SandboxLimits, SandboxUnavailable
from tests.improver.candidatekit import program
from tests.improver.taskkit import OPERATOR, ScriptedModel, paid_task, pays_right

VARIANT = Variant(OPERATOR, "", ("script:test",))
WORD = "heron-42"
SECRETS = {"OPENAI_API_KEY": "sk-harness-secret", "AGENTD_WALLET_PASSPHRASE": "passphrase-secret"}


def run(candidate: Command, task=None, limits: EpisodeLimits = EpisodeLimits()) -> RunResult:
    model = ScriptedModel(pays_right())
    return asyncio.run(run_task(task or paid_task(), VARIANT, candidate, lambda spec: model, limits, retries=2))


HUNTS = """
import os
found = []
paths = [*json.loads(os.environ.get("HUNT", "[]")), f"/proc/{os.getppid()}/environ", "/proc/1/environ"]
for path in paths:
    try:
        found.append(open(path, errors="replace").read())
    except OSError:
        pass
for root, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys", "/dev", "/usr", sys.base_prefix)]
    for name in files:
        try:
            text = open(os.path.join(root, name), errors="replace").read(1 << 20)
        except OSError:
            continue
        if '"canary": true' in text or "code word" in text.lower():
            found.append(text)
send('done', {'answer': json.dumps({"found": found, "env": dict(os.environ)})})
"""


def test_a_candidate_on_a_sealed_task_finds_no_secret_and_no_task_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    canary = make_canary(0, paid_task(), WORD)
    sealed = tmp_path / "home" / "routes" / "seals" / "s1.json"
    sealed.parent.mkdir(parents=True)
    sealed.write_text(json.dumps(canary.to_json()))
    hunter = program(tmp_path, HUNTS)
    env = {**hunter.request.env, "HUNT": json.dumps([str(sealed), str(Path.home() / ".agentd" / "log-key.json")])}
    result = run(replace(hunter, request=replace(hunter.request, env=env)), task=canary)
    assert WORD in sealed.read_text()  # the harness has it; the candidate must not
    assert WORD not in result.run.answer and not any(v in result.run.answer for v in SECRETS.values())
    assert result.outcome == "failed" and result.task == "canary-0"


MISDEEDS = {
    "forks without end": "import os\nwhile True:\n    os.fork()\n",
    "spins on the CPU": "while True:\n    pass\n",
    "floods its error output": "while True:\n    sys.stderr.write('x' * 65536)\n",
    "eats memory": "hoard = []\nwhile True:\n    hoard.append(bytearray(64 << 20))\n",
}


@pytest.mark.parametrize("misdeed", sorted(MISDEEDS))
def test_a_candidate_that_misbehaves_fails_and_is_never_errored(tmp_path: Path, misdeed: str) -> None:
    candidate = program(tmp_path, MISDEEDS[misdeed])
    tight = SandboxLimits(cpu_seconds=2, processes=16, memory_bytes=512 << 20)
    result = run(
        replace(candidate, request=replace(candidate.request, limits=tight)),
        limits=EpisodeLimits(max_output_bytes=200_000),
    )
    assert result.outcome == "failed" and result.reward == 0.0 and result.attempts == 1
    assert result.failures[0].startswith("the candidate broke the run: it exited before it said it was done")


def test_with_no_engine_the_runner_is_refused_with_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-engine.sock'}")
    with pytest.raises(SandboxUnavailable, match=r"apt-get install docker\.io"):
        make_runner("docker")
