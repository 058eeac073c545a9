"""What the dashboard's tests share: the demo's home, made once for the package with the
lines the demo printed, and Debian's chromium driven by Playwright (no browser download);
the browser tests skip where it is missing, except under AGENTD_REQUIRE_CHROMIUM=1 (CI),
where they must run."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from agentd.app.demo import run_demo
from agentd.home import Home
from tests.server.dashkit import ARGS, CHROMIUM, Demo


@pytest.fixture(scope="package")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    home, said = Home(tmp_path_factory.mktemp("demo") / "home"), []
    assert run_demo(home, said.append, lambda line: None)
    return Demo(home, said)


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        if os.environ.get("AGENTD_REQUIRE_CHROMIUM") == "1":
            pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    opened = context.new_page()
    yield opened
    context.close()
