"""The dashboard's main pages as PNGs, for the README: the demo's home (made afresh, or
one given) served by a real `agentd serve` on 127.0.0.1, each page opened in Debian's
chromium through Playwright (no browser download) and shot whole.

    python bench/screenshots.py                     # a fresh demo home; PNGs in docs/dashboard/
    python bench/screenshots.py --home DIR --out DIR
"""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # bench/ledger.py would shadow the ledger package

import httpx

from agentd.app.demo import PROFILE
from agentd.app.sessions import open_sessions
from agentd.home import Home
from improver import current_seal

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
WIDTH, HEIGHT = 1280, 900


def pages(home: Home) -> dict[str, str]:
    """Each screenshot's name and the page it shows: the transcript is of a session that
    went badly and became one of the lesson loop's tasks to choose on."""
    harvested = {t.source.get("session") for t in current_seal(home.routes, PROFILE).train().tasks}
    session = next(r for r in open_sessions(home).list() if r.id in harvested and r.outcome == "bad")
    return {
        "front": "/",
        "profile": f"/profiles/{PROFILE}",
        "decisions": f"/profiles/{PROFILE}/decisions",
        "transcript": f"/sessions/{session.id}",
        "tasks": f"/profiles/{PROFILE}/tasks",
        "third-parties": "/trust",
    }


def agentd(home: Home, *args: str, **popen: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "agentd", "--home", str(home.root), *args], **popen)  # type: ignore[call-overload]


def serve(home: Home) -> tuple[subprocess.Popen[bytes], str]:
    """`agentd serve` on a free port, once it answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    daemon = agentd(home, "serve", "--port", str(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    while daemon.poll() is None:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return daemon, url
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"agentd serve ended with {daemon.returncode} before it answered")


def shoot(url: str, shots: dict[str, str], out: Path) -> None:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}).new_page()
        for name, path in shots.items():
            page.goto(url + path)
            page.screenshot(path=out / f"{name}.png", full_page=True)
            print(f"{out / name}.png: {path}")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, help="a home the demo filled (default: run the demo afresh)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentd-screenshots-") as scratch:
        home = Home(options.home or Path(scratch) / "home")
        if options.home is None and agentd(home, "demo", stdout=subprocess.DEVNULL).wait() != 0:
            raise SystemExit("agentd demo failed")
        daemon, url = serve(home)
        try:
            shoot(url, pages(home), options.out)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(60)


if __name__ == "__main__":
    main()
