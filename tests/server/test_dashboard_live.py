"""The dashboard while the home changes under it, in a real headless Chromium against a
real `agentd serve` on a copy of the demo's home: a page shows a session recorded after
it was opened without being reloaded, a transcript holding HTML and script is shown as
the text it is, never run, and the improver's decisions show once `improve improver`
made them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentd.app.demo import PROFILE
from agentd.app.intake import import_file
from agentd.home import Home
from tests.server.dashkit import Demo, daemon

# What a model, a tool or a user may say: each would run or load something if it were markup.
HOSTILE = (
    '<script>window.pwned = "script"</script>'
    "<img src=x onerror=\"window.pwned = 'img'\">"
    '"><svg onload="window.pwned = \'svg\'">'
)


@pytest.fixture(scope="module")
def home(demo: Demo, tmp_path_factory: pytest.TempPathFactory) -> Home:
    return demo.copy(tmp_path_factory.mktemp("live") / "home")


@pytest.fixture(scope="module")
def site(home: Home) -> Iterator[str]:
    with daemon(home) as url:
        yield url


def recorded(home: Home, folder: Path, messages: list[dict[str, Any]]) -> str:
    """A transcript taken in as `sessions import` takes it: the new session's id."""
    path = folder / "transcript.json"
    path.write_text(json.dumps({"messages": messages, "metadata": {"check": "failed"}}))
    (record,) = import_file(home, path, PROFILE).records
    return record.id


def paid(task: str, payee: str, answer: str) -> list[dict[str, Any]]:
    """A session asked `task` that pays `payee`, the tool answering `answer`."""
    call = {"to": payee, "amount": "1", "invoice": "77"}
    return [
        {"role": "user", "content": task},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "pay", "arguments": json.dumps(call)}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": answer},
        {"role": "assistant", "content": f"Done. {answer}"},
    ]


def test_a_page_shows_a_session_recorded_after_it_opened_without_a_reload(
    site: str, page: Any, home: Home, tmp_path: Path
) -> None:
    page.goto(site + "/")
    page.evaluate("window.stayed = true")  # gone if the page were loaded again
    task = "Pay invoice 88 from Acme, 2 USD, to acme."
    assert task not in page.inner_text("#sessions")
    session = recorded(home, tmp_path, paid(task, "acme", "paid 1 USD to acme"))
    row = page.locator(f'#sessions tbody tr[data-session="{session}"]')
    row.wait_for()
    assert task in row.inner_text() and "failed" in row.inner_text()
    assert page.evaluate("window.stayed") is True
    assert page.inner_text("#live-status").startswith("live · updated")


def test_a_transcript_holding_script_is_shown_as_text_and_never_run(
    site: str, page: Any, home: Home, tmp_path: Path
) -> None:
    task = f"Pay invoice 77 {HOSTILE}"
    session = recorded(home, tmp_path, paid(task, HOSTILE, f"paid {HOSTILE}"))
    for address in ("/", f"/sessions?q={session}", f"/sessions/{session}"):
        page.goto(site + address)
        assert page.evaluate("window.pwned") is None, address
        assert page.locator("main script, main img, main svg:not(#chart)").count() == 0, address
    assert page.inner_text("#task") == task
    call = page.locator(".call")
    assert json.loads(call.locator("pre.arguments").inner_text())["to"] == HOSTILE
    assert call.locator("pre.answer").inner_text() == f"paid {HOSTILE}"
    assert page.locator(".message.user pre.text").inner_text() == task
    page.goto(f"{site}/sessions?q=window.pwned")  # found by its text, and still inert in the list
    assert page.locator("table.sessions tbody tr").count() == 1 and page.evaluate("window.pwned") is None


def test_the_improvers_changes_show_as_improve_improver_printed_them(site: str, page: Any, home: Home) -> None:
    problems = home.profiles_dir / PROFILE / "problems"
    given, held = (f"{problems / f'p{n}-train.json'},{problems / f'p{n}-held.json'}" for n in (0, 2))
    improve = ["improve", "improver", PROFILE, "--proposer", "script:models/improver.toml"]
    small = ["--runs", "2", "--rounds", "1", "--replications", "2"]
    # A process of its own: this one runs the browser's event loop, which the loop's own cannot share.
    argv = [sys.executable, "-m", "agentd", "--home", str(home.root), *improve, "--problem", given]
    done = subprocess.run([*argv, "--held-out-problem", held, *small], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    page.goto(f"{site}/profiles/{PROFILE}")
    tried = page.locator("#archive-improver li")
    assert tried.count() == 1 and 'its instructions, adding "Write one lesson per failure."' in tried.inner_text()
    tried.locator("a.verdict").click()
    page.wait_for_url(f"**/profiles/{PROFILE}/decisions#i-*")
    said = page.locator(".decision:target p.said").inner_text()
    assert said in done.stdout.splitlines() and said.endswith("on the problems to choose on: not better beyond chance")
