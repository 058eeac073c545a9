"""The dashboard: server-rendered pages over a home, the operator's window on the loop.

`/` profiles with their schedules, seals and recent sessions; `/sessions` every session,
a page at a time, searched with `?q=`; `/sessions/ID` a transcript, each tool call with
its arguments and answer; `/profiles/NAME` the archives as trees and the pass rate over
kept steps with its intervals; `/profiles/NAME/decisions` every decision of its loops as
their commands printed it; `/profiles/NAME/tasks` each archive as a grid of tasks by
variants; `/trust` releases, attestations, bonds, challenges, rulings and examinations;
`/ledger` the entries by Pulse, of one `?kind=` and by one `?author=` (a wallet id, or a
name of this home's) if asked; `/ledger/PULSE` one entry decoded, with its inclusion
proof, which the page's own JavaScript checks against the log's signed checkpoint
(nothing is taken on trust from the server but the bytes it sends). `/live` is what a
page polls to know the home changed, and fetch itself again. No build step and nothing
fetched from elsewhere: the templates and static files ship in the package.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from agentd.app import overview as view
from agentd.app.archives import CODE, LESSONS
from agentd.app.decisions import IMPROVER, improver_decisions, rounds
from agentd.app.ledger import entry_filter, rule_set
from agentd.app.taskgrid import grids
from agentd.app.thirdparties import third_parties
from agentd.app.transcripts import session_page, transcript
from agentd.cli.options import format_usd
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.wallets import wallet_names
from improver import ImproverError
from ledger import LedgerError

HERE = Path(__file__).parent
TEMPLATES = Jinja2Templates(directory=str(HERE / "templates"))
PAGE = 50  # entries on a ledger page
Status = Callable[[], dict[str, Any]]


@dataclass(frozen=True)
class Dot:
    """A pass rate drawn at (x, y), its interval from `low` to `high` (all in pixels)."""

    x: float
    y: float
    low: float
    high: float
    title: str


@dataclass(frozen=True)
class Series:
    kind: str  # choose or sealed: its colour and marker
    dots: list[Dot]

    @property
    def line(self) -> str:
        return " ".join(f"{d.x},{d.y}" for d in self.dots)


@dataclass(frozen=True)
class Chart:
    """An inline SVG of pass rates (0..1) over kept steps with their 95% intervals, laid
    out here so the template only draws: one series for the tasks to choose on, one for
    the sealed tasks, drawn side by side so that equal rates never hide one another."""

    width: int
    height: int
    left: int
    top: int
    plot_width: int
    plot_height: int
    xs: list[float]
    labels: list[str]
    series: list[Series]

    def y(self, rate: float) -> float:
        return round(self.top + (1 - rate) * self.plot_height, 1)


SIDE = 9  # pixels either side of a step that each series is drawn at


def chart(points: list[view.Point]) -> Chart | None:
    if not points:
        return None
    width, height, left, top, right, bottom = 640, 240, 48, 16, 48, 40
    plot_width, plot_height = width - left - right, height - top - bottom
    gap = plot_width / max(len(points) - 1, 1)
    xs = [round(left + i * gap if len(points) > 1 else left + plot_width / 2, 1) for i in range(len(points))]
    laid = Chart(width, height, left, top, plot_width, plot_height, xs, [], [])
    choose = [
        _dot(laid, x - SIDE, p.choose, p.choose_interval, f"{p.change}: {percent(p.choose)} on the tasks to choose on")
        for x, p in zip(xs, points, strict=True)
    ]
    sealed = [
        _dot(laid, x + SIDE, p.sealed, p.sealed_interval, f"{p.change}: {percent(p.sealed)} on the sealed tasks")
        for x, p in zip(xs, points, strict=True)
        if p.sealed and p.sealed_interval
    ]
    labels = ["before" if p.step is None else p.step[:8] for p in points]
    return replace(laid, labels=labels, series=[Series("choose", choose), Series("sealed", sealed)])


def _dot(laid: Chart, x: float, counts: tuple[int, int], interval: tuple[float, float], title: str) -> Dot:
    low, high = interval
    return Dot(
        round(x, 1), laid.y(_rate(counts)), laid.y(low), laid.y(high), f"{title} (95% interval {low:.0%} to {high:.0%})"
    )


def _rate(counts: tuple[int, int]) -> float:
    return counts[0] / counts[1] if counts[1] else 0.0


def percent(counts: tuple[int, int] | list[int]) -> str:
    return f"{counts[0]}/{counts[1]} ({round(100 * counts[0] / counts[1])}%)" if counts[1] else "0/0"


TEMPLATES.env.filters["percent"] = percent


def when(stamp: str | None) -> str:
    """A time stamp as a person reads it, in UTC to the second."""
    if not stamp:
        return "—"
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


TEMPLATES.env.filters["when"] = when
TEMPLATES.env.filters["usd"] = format_usd
TEMPLATES.env.filters["pretty"] = lambda data: json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True)


def routes(home: Home, status: Status | None = None) -> list[BaseRoute]:
    """The dashboard's pages over `home`; `status` is the daemon's own (schedules with
    their last and next runs, the kill switch), else they are read from the profiles."""

    def front(request: Request) -> Response:
        return _page(request, "index.html", overview=view.overview(home, status() if status else None))

    def live(request: Request) -> Response:
        return JSONResponse({"stamp": view.stamp(home)}, headers={"Cache-Control": "no-store"})

    def trust(request: Request) -> Response:
        return _page(request, "trust.html", trust=third_parties(home))

    return [
        Route("/", _guarded(front, home), name="dashboard"),
        Route("/live", _guarded(live), name="live"),
        *_session_pages(home),
        *_profile_pages(home),
        Route("/trust", _guarded(trust, home), name="trust"),
        *_ledger_pages(home),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]


def _session_pages(home: Home) -> list[BaseRoute]:
    def sessions(request: Request) -> Response:
        query = request.query_params.get("q", "")
        listing = session_page(home, _number(request.query_params.get("page")) or 1, query)
        pages = {
            side: _sessions_query(at, query) if 1 <= at <= listing.pages else None
            for side, at in (("newer", listing.page - 1), ("older", listing.page + 1))
        }
        return _page(request, "sessions.html", listing=listing, pages=pages)

    def session(request: Request) -> Response:
        found = transcript(home, request.path_params["session"])
        if found is None:
            return _missing(request, f"no session {request.path_params['session']!r} in {home.root}")
        return _page(request, "session.html", t=found, s=found.session)

    return [
        Route("/sessions", _guarded(sessions, home), name="sessions"),
        Route("/sessions/{session}", _guarded(session, home), name="session"),
    ]


def _profile_pages(home: Home) -> list[BaseRoute]:
    def known(page: Callable[[Request, str], Response]) -> Callable[[Request], Response]:
        def serve(request: Request) -> Response:
            name = request.path_params["name"]
            if not view.known_profile(home, name):
                return _missing(request, f"no profile {name!r} in {home.root}")
            return page(request, name)

        return serve

    def profile(request: Request, name: str) -> Response:
        points = view.progress(home, name)
        archives, improvers = view.archives(home, name), improver_decisions(home, name)
        return _page(
            request,
            "profile.html",
            profile=name,
            archives=archives,
            improvers=improvers,
            points=points,
            chart=chart(points),
        )

    def decisions(request: Request, name: str) -> Response:
        found = rounds(home, name)
        loops = {loop: [r for r in found if r.loop == loop] for loop in (LESSONS, CODE, IMPROVER)}
        return _page(request, "decisions.html", profile=name, loops=loops)

    def tasks(request: Request, name: str) -> Response:
        return _page(request, "tasks.html", profile=name, grids=grids(home, name))

    return [
        Route("/profiles/{name}", _guarded(known(profile), home), name="profile"),
        Route("/profiles/{name}/decisions", _guarded(known(decisions), home), name="decisions"),
        Route("/profiles/{name}/tasks", _guarded(known(tasks), home), name="tasks"),
    ]


def _ledger_pages(home: Home) -> list[BaseRoute]:
    def ledger(request: Request) -> Response:
        kind, author = request.query_params.get("kind") or None, request.query_params.get("author") or None
        names = wallet_names(home, skip=lambda _: None)  # a wallet file that cannot be read only goes unnamed here
        form: dict[str, Any] = {"kind": kind, "author": author, "kinds": sorted(rule_set().kinds), "names": names}
        try:
            kind_filter, author_id = entry_filter(home, kind, author)
        except AgentdError as exc:  # what the form was given: said on the form, which stays to be put right
            return _page(
                request, "ledger.html", status_code=400, problem=str(exc).splitlines()[0], listing=None, **form
            )
        listing = view.entry_page(home, _number(request.query_params.get("from")), PAGE, kind_filter, author_id)
        filters = {"kind": kind, "author": author}  # as given, so a page's links read as its form does
        pages = {
            side: _query(at, filters) if at else None
            for side, at in (("earlier", listing.earlier), ("later", listing.later))
        }
        return _page(request, "ledger.html", listing=listing, problem=None, pages=pages, **form)

    def entry(request: Request) -> Response:
        pulse = _number(request.path_params["pulse"])
        found = view.entry(home, pulse) if pulse else None
        if found is None:
            text = request.path_params["pulse"]
            return _missing(request, f"no entry at Pulse {text}: the ledger holds {view.ledger_size(home)} entries")
        return _page(request, "entry.html", entry=found, proof=json.dumps(found.proof, indent=2))

    return [
        Route("/ledger", _guarded(ledger), name="ledger"),
        Route("/ledger/{pulse}", _guarded(entry), name="entry"),
    ]


def _guarded(page: Callable[[Request], Response], live: Home | None = None) -> Callable[[Request], Response]:
    """`page`, its errors from the home a page that names them; with `live`, the page
    refreshes itself when that home changes (its stamp is taken before the page reads
    anything, so a change while it reads is a change after)."""

    def serve(request: Request) -> Response:
        try:
            if live is not None:
                request.state.stamp = view.stamp(live)
            return page(request)
        except (AgentdError, ImproverError, LedgerError) as exc:
            return _page(request, "error.html", status_code=500, title="Something is wrong in the home", line=str(exc))

    return serve


def _page(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
    stamp = getattr(request.state, "stamp", None)  # a live page's: what its script polls against
    return TEMPLATES.TemplateResponse(request, template, {"stamp": stamp, **context}, status_code=status_code)


def _missing(request: Request, line: str) -> Response:
    return _page(request, "error.html", status_code=404, title="Not found", line=line)


def _query(start: int, filters: dict[str, str | None]) -> str:
    """The query of the ledger page from Pulse `start`, with the filters that were given."""
    return urlencode({"from": start, **{name: value for name, value in filters.items() if value}})


def _sessions_query(page: int, query: str) -> str:
    """The query of the sessions' page `page`, with the search that was given."""
    return urlencode({"page": page, **({"q": query} if query else {})})


def _number(text: str | None) -> int | None:
    """A Pulse or a page's number as an address gives it: a whole number from 1, else None."""
    return int(text) if text and text.isascii() and text.isdigit() and 0 < len(text) < 19 and int(text) > 0 else None
