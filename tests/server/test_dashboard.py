"""The dashboard in a real headless Chromium, served over loopback by uvicorn on the
demo's home: what an operator looks for in the morning, and the inclusion proof that
the page itself checks against the log's signed checkpoint. (The browser and the demo's
home are conftest.py's.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest

from agentd.app.demo import PROFILE
from agentd.app.ledger import open_ledger
from agentd.home import Home
from agentd.server.dashboard import PAGE
from agentd.wallets import create_wallet, log_key, wallet_id_of
from ledger import MINT, TRANSFER, Wallet
from tests.examplekit import LESSON
from tests.server.dashkit import Demo, serving

# An hourly harvest at a minute that does not exist: named on the page, the other job still shown.
# The example's own [schedule] runs improve at 03:00; a malformed harvest line is added.
BAD_HARVEST = 'harvest = "61 * * * *"\n'


@pytest.fixture(scope="module")
def demo_home(demo: Demo, tmp_path_factory: pytest.TempPathFactory) -> Home:
    """The demo's home (sessions, a seal, a kept lesson), with a schedule in its profile."""
    home = demo.copy(tmp_path_factory.mktemp("dashboard") / "home")
    toml = home.profiles_dir / PROFILE / "profile.toml"
    improve = 'improve = "0 3 * * *"\n'
    assert improve in toml.read_text()
    toml.write_text(toml.read_text().replace(improve, improve + BAD_HARVEST, 1))
    return home


def ledger_size(home: Home) -> int:
    with open_ledger(home, read_only=True) as ledger:
        return ledger.size


def lesson_pulse(home: Home) -> int:
    """The Pulse of the demo's kept lesson."""
    with open_ledger(home, read_only=True) as ledger:
        (entry,) = [e for e in ledger.entries(kind="agent.improvement/v1") if e.body["profile"] == PROFILE]
        return entry.pulse


@pytest.fixture(scope="module")
def site(demo_home: Home) -> Iterator[str]:
    with serving(demo_home) as url:
        yield url


def test_the_overview_shows_schedules_seals_and_sessions(site: str, page: Any, tmp_path: Path) -> None:
    page.goto(site + "/")
    page.screenshot(path=tmp_path / "overview.png", full_page=True)
    profiles = page.inner_text("#profiles")
    assert "invoices" in profiles and "0 3 * * *" in profiles
    improve = page.locator("#profiles tr", has_text="03:00:00 UTC").first.inner_text()
    assert "03:00:00 UTC" in improve  # the next run, from the cron expression
    assert "not known: the daemon is not running" in improve
    assert "schedule harvest: '61 * * * *' is not a cron expression" in profiles
    seals = page.locator("#seals tbody tr").first.inner_text()
    assert "1 of 4" in seals and "3 left" in seals and "Pulse 20" in seals
    sessions = page.locator("#sessions tbody tr")
    assert sessions.count() == 20  # the newest 20 of the demo's 30
    paid = page.locator("#sessions tbody tr", has_text="Pay invoice 36 from Initech").first.inner_text()
    assert "bad" in paid and "paid the payee the invoice named" in paid
    assert page.locator("#sessions tbody tr", has_text="passed").filter(has_text="good").count() > 0
    assert page.inner_text("#kill-switch") == "kill switch off"


def test_the_archive_is_a_tree_with_the_kept_step_and_its_chart(site: str, page: Any, tmp_path: Path) -> None:
    page.goto(site + "/")
    page.click("#profiles a:text-is('invoices')")
    page.screenshot(path=tmp_path / "profile.png", full_page=True)
    kept = page.locator("#archive li.kept")
    assert kept.count() == 1
    text = kept.inner_text()
    assert LESSON in text and "kept as step" in text and "96/96 (100%)" in text  # measured afresh once kept
    root = page.locator('#archive li[data-variant="0"] > .variant').inner_text()
    assert (
        "the agent as it was" in root and "48/96 (50%)" in root and "its line 168/216 (78%)" in root
    )  # the shortcut among it
    assert page.locator('#archive li[data-variant="0"] li').count() == 2  # both tried changes grew from it
    chart = page.locator("svg#chart")
    assert chart.is_visible()
    assert chart.locator("g.point.choose").count() == 2  # before, and after the kept step
    assert chart.locator("g.point.sealed").count() == 2  # beside them, never hidden under them
    rows = page.locator("#progress tbody tr")
    assert "48/96 (50%)" in rows.first.inner_text() and "24/24 (100%)" in rows.last.inner_text()


def test_an_entry_is_decoded_and_its_proof_checked_in_the_page(
    site: str, page: Any, demo_home: Home, tmp_path: Path
) -> None:
    size, kept = ledger_size(demo_home), lesson_pulse(demo_home)
    page.goto(site + "/ledger")
    assert page.locator("#entries tbody tr").count() == min(size, PAGE)  # the newest page
    page.click(f"#entries a:text-is('{kept}')")
    page.wait_for_selector("#proof-status.ok, #proof-status.failed")
    page.screenshot(path=tmp_path / "entry.png", full_page=True)
    assert "agent.improvement/v1" in page.inner_text("h1")
    body = json.loads(page.inner_text("#entry-body"))
    assert body["after"]["lessons"] == LESSON and body["confirmation"] == 1
    status = page.inner_text("#proof-status")
    assert status.startswith(f"Proof checked: Pulse {kept} is in the log's tree of {size} entries"), status
    assert "signature by the log's key: checked" in page.inner_text("#proof-steps")
    with open_ledger(demo_home, read_only=True) as ledger:  # what the page checked is what the log signed
        doc = json.loads(page.input_value("#proof-doc"))
        assert doc["checkpoint"] == ledger.checkpoint_of(size)
        assert doc["claim"] == ledger.get(21).claim_id


@pytest.mark.parametrize(
    "tamper, reason",
    [
        (
            lambda doc: {**doc, "proof": [doc["proof"][1], doc["proof"][0], *doc["proof"][2:]]},
            "leads to a different root",
        ),
        (lambda doc: {**doc, "leaf_hash": doc["proof"][0]}, "do not hash to the proof's leaf hash"),
        (lambda doc: {**doc, "proof": doc["proof"][:-1]}, "shorter than the tree is deep"),
        (
            lambda doc: {**doc, "checkpoint": doc["checkpoint"].replace("\n\n\u2014 ", "\n\n\u2014 x", 1)},
            "no signature by the log's key",
        ),
    ],
)
def test_a_tampered_proof_is_shown_failing(site: str, page: Any, tmp_path: Path, tamper: Callable, reason: str) -> None:
    page.goto(site + "/ledger/5")
    page.wait_for_selector("#proof-status.ok")
    doc = json.loads(page.input_value("#proof-doc"))
    page.fill("#proof-doc", json.dumps(tamper(doc)))
    page.click("#check-proof")
    page.wait_for_selector("#proof-status.failed")
    page.screenshot(path=tmp_path / "tampered.png", full_page=True)
    status = page.inner_text("#proof-status")
    assert status.startswith("Proof FAILED") and reason in status, status


def test_a_forged_checkpoint_signature_is_shown_failing(site: str, page: Any) -> None:
    page.goto(site + "/ledger/3")
    page.wait_for_selector("#proof-status.ok")
    doc = json.loads(page.input_value("#proof-doc"))
    text, signature = doc["checkpoint"].split("\n\n")
    name, blob = signature.rstrip("\n").split(" ")[1:]
    forged = blob[:20] + ("A" if blob[20] != "A" else "B") + blob[21:]  # past the key hash: the signature itself
    page.fill("#proof-doc", json.dumps({**doc, "checkpoint": f"{text}\n\n\u2014 {name} {forged}\n"}))
    page.click("#check-proof")
    page.wait_for_selector("#proof-status.failed")
    assert "the checkpoint's signature does not hold" in page.inner_text("#proof-status")


def test_an_unknown_pulse_or_profile_is_a_404_page_with_a_line(
    site: str, page: Any, demo_home: Home, tmp_path: Path
) -> None:
    response = page.goto(site + "/ledger/99")
    assert response.status == 404
    assert page.inner_text("#problem") == f"no entry at Pulse 99: the ledger holds {ledger_size(demo_home)} entries"
    page.screenshot(path=tmp_path / "missing.png", full_page=True)
    assert page.goto(site + "/ledger/abc").status == 404
    response = page.goto(site + "/profiles/nobody")
    assert response.status == 404 and "no profile 'nobody'" in page.inner_text("#problem")


def test_with_the_daemons_status_the_last_run_and_its_warnings_show(demo_home: Home, page: Any) -> None:
    status = {
        "home": str(demo_home.root),
        "kill_switch": True,
        "profiles": [
            {
                "name": PROFILE,
                "schedules": [
                    {
                        "job": "improve",
                        "cron": "0 3 * * *",
                        "next_run": "2030-01-02T03:00:00+00:00",
                        "last_run": "2030-01-01T03:00:00+00:00",
                        "last_result": "kept 1 change",
                    },
                ],
                "seal": None,
                "warnings": ["the seal is spent: seal fresh tasks"],
            }
        ],
    }
    with serving(demo_home, lambda: status) as url:
        page.goto(url + "/")
        row = page.locator("#profiles tr", has_text="03:00:00 UTC").inner_text()
        assert "2030-01-02 03:00:00 UTC" in row and "2030-01-01 03:00:00 UTC" in row and "kept 1 change" in row
        assert "the seal is spent: seal fresh tasks" in page.inner_text("#profiles")
        assert "kill switch ON" in page.inner_text("#kill-switch")


def test_a_fresh_home_shows_what_to_do_first(tmp_path: Path) -> None:
    home = Home(tmp_path / "empty")
    with serving(home) as url:
        front = httpx.get(url + "/")
        assert front.status_code == 200 and "No profile yet" in front.text and "No seal yet" in front.text
        assert httpx.get(url + "/ledger").status_code == 200
        missing = httpx.get(url + "/ledger/1")
        assert missing.status_code == 404 and "no entry at Pulse 1" in missing.text


@pytest.fixture(scope="module")
def busy_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Home, Wallet]:
    """A home whose ledger holds more than a page of each filter, interleaved: the log
    mints to strangers while wallet bob (a wallet of the home) pays them."""
    home = Home(tmp_path_factory.mktemp("busy") / "home")
    with pytest.MonkeyPatch.context() as env:
        env.delenv("AGENTD_WALLET_PASSPHRASE", raising=False)  # kept unencrypted: no prompt
        bob = create_wallet(home, "bob")
    with open_ledger(home) as ledger:
        log = log_key(home)
        ledger.append(log, MINT, {"to": bob.id, "cents": 1000})
        for _ in range(PAGE + 20):
            stranger = Wallet.generate().id
            ledger.append_many(
                [(log, MINT, {"to": stranger, "cents": 5}), (bob, TRANSFER, {"to": stranger, "cents": 1})]
            )
    return home, bob


def listed(html: str) -> list[int]:
    """The Pulses a ledger page lists, in its order."""
    return [int(p) for p in re.findall(r'<tr><td><a href="[^"]*/ledger/(\d+)">', html)]


def link(html: str, side: str) -> str | None:
    found = re.search(rf'id="{side}" href="([^"]+)"', html)
    return unescape(found.group(1)) if found else None


def test_the_ledger_lists_one_kind_or_one_author_and_its_pages_keep_to_them(busy_home: tuple[Home, Wallet]) -> None:
    home, bob = busy_home
    with open_ledger(home, read_only=True) as ledger:
        by_bob = [e.pulse for e in ledger.entries(author=bob.id)]
        mints = [e.pulse for e in ledger.entries(kind=MINT)]
    assert len(by_bob) > PAGE and len(mints) > PAGE
    with serving(home) as url, httpx.Client() as http:
        for query, expected in [
            ({"author": "bob"}, by_bob),
            ({"author": bob.id}, by_bob),
            ({"kind": TRANSFER}, by_bob),
            ({"kind": MINT, "author": "log"}, mints),
        ]:
            first = http.get(url + "/ledger", params=query)
            assert first.status_code == 200
            assert listed(first.text) == expected[-PAGE:]  # the newest page first
            assert link(first.text, "later") is None
            pages, earlier = [listed(first.text)], link(first.text, "earlier")
            while earlier:  # back to the first page, each link keeping the filters
                assert all(f"{name}={value}" in unquote(earlier) for name, value in query.items())
                page = http.get(earlier)
                pages.insert(0, listed(page.text))
                earlier = link(page.text, "earlier")
            # Every page a run of the matching entries; the first page from the first of
            # them (it may overlap the next, as the unfiltered first page does).
            assert all(p == expected[expected.index(p[0]) : expected.index(p[0]) + PAGE] for p in pages)
            assert pages[0] == expected[:PAGE] and {claim for page in pages for claim in page} == set(expected)
            later = link(http.get(url + "/ledger", params={**query, "from": expected[0]}).text, "later")
            assert later and listed(http.get(later).text) == expected[PAGE : 2 * PAGE]
        bobs = http.get(url + "/ledger", params={"author": "bob"}).text
        assert bobs.count(f'<td title="{bob.id}">bob</td>') == PAGE  # named as the home names it
        none = http.get(url + "/ledger", params={"kind": MINT, "author": "bob"})
        assert none.status_code == 200 and listed(none.text) == [] and f"No entries of kind {MINT} by bob" in none.text


@pytest.mark.parametrize(
    "query, line",
    [
        ({"kind": "funds.nope/v1"}, "kind 'funds.nope/v1' is not a kind of entry; the kinds are: "),
        ({"author": "nobody"}, "no wallet named nobody in "),
        ({"author": "not a name!"}, "'not a name!' is neither a wallet name nor a wallet id (32 hex digits)"),
    ],
)
def test_a_filter_that_names_nothing_is_one_line_on_the_page_with_400(
    busy_home: tuple[Home, Wallet], query: dict, line: str
) -> None:
    home, _ = busy_home
    with serving(home) as url:
        answer = httpx.get(url + "/ledger", params=query)
    assert answer.status_code == 400 and "Traceback" not in answer.text
    (problem,) = re.findall(r'<p class="problem" id="problem">([^<]*)</p>', answer.text)
    assert unescape(problem).startswith(line) and "\n" not in problem
    assert 'id="filters"' in answer.text and listed(answer.text) == []  # the form stays, to put it right


def test_the_filter_form_lists_what_it_is_given(site: str, page: Any, demo_home: Home, tmp_path: Path) -> None:
    with open_ledger(demo_home, read_only=True) as ledger:
        sessions = [
            e.pulse for e in ledger.entries(kind="agent.session/v1", author=wallet_id_of(demo_home, "invoices"))
        ]
    assert 0 < len(sessions) < ledger_size(demo_home) // 2  # the other profile's sessions are left out
    page.goto(site + "/ledger")
    page.select_option("#filters select[name=kind]", "agent.session/v1")
    page.fill("#filters input[name=author]", "invoices")
    page.click("#filters button")
    page.wait_for_url("**/ledger?kind=agent.session*author=invoices")
    page.screenshot(path=tmp_path / "filtered.png", full_page=True)
    assert [int(t) for t in page.locator("#entries tbody tr td:first-child").all_inner_texts()] == sessions
    assert set(page.locator("#entries tbody tr td:nth-child(3)").all_inner_texts()) == {"invoices"}
    assert page.input_value("#filters input[name=author]") == "invoices"
    assert page.locator("#filters select[name=kind]").input_value() == "agent.session/v1"
    page.click("#filters a:text-is('every entry')")
    page.wait_for_url("**/ledger")
    assert page.locator("#entries tbody tr").count() == min(ledger_size(demo_home), PAGE)
