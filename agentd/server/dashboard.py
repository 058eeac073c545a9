"""The dashboard: server-rendered pages over a home, for the operator's morning look.

`/` profiles with their schedules, seals and recent sessions; `/profiles/NAME` the
archive as a tree and the pass rate over kept steps; `/ledger` the entries by Pulse,
of one `?kind=` and by one `?author=` (a wallet id, or a name of this home's) if asked;
`/ledger/PULSE` one entry decoded, with its inclusion proof, which the page's own
JavaScript checks against the log's signed checkpoint (nothing is taken on trust from
the server but the bytes it sends). No build step and nothing fetched from elsewhere:
the templates and static files ship in the package.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from agentd.app import overview as view
from agentd.app.ledger import entry_filter, rule_set
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
class Chart:
    """An inline SVG of pass rates (0..1) over kept steps, laid out here so the template
    only draws: one series for the tasks to choose on, one for the sealed tasks."""

    width: int
    height: int
    left: int
    top: int
    plot_width: int
    plot_height: int
    xs: list[float]
    choose: list[float]
    sealed: list[float | None]
    labels: list[str]
    titles: list[str]

    def y(self, rate: float) -> float:
        return round(self.top + (1 - rate) * self.plot_height, 1)

    def line(self, rates: list[float | None] | list[float]) -> str:
        return " ".join(f"{x},{self.y(r)}" for x, r in zip(self.xs, rates, strict=False) if r is not None)


def chart(points: list[view.Point]) -> Chart | None:
    if not points:
        return None
    width, height, left, top, right, bottom = 640, 240, 48, 16, 48, 40
    plot_width, plot_height = width - left - right, height - top - bottom
    gap = plot_width / max(len(points) - 1, 1)
    xs = [round(left + i * gap if len(points) > 1 else left + plot_width / 2, 1) for i in range(len(points))]
    return Chart(
        width,
        height,
        left,
        top,
        plot_width,
        plot_height,
        xs,
        [_rate(p.choose) for p in points],
        [_rate(p.sealed) if p.sealed else None for p in points],
        ["before" if p.step is None else p.step[:8] for p in points],
        [p.change for p in points],
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
TEMPLATES.env.filters["pretty"] = lambda data: json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True)


def routes(home: Home, status: Status | None = None) -> list[BaseRoute]:
    """The dashboard's pages over `home`; `status` is the daemon's own (schedules with
    their last and next runs, the kill switch), else they are read from the profiles."""

    def front(request: Request) -> Response:
        return _page(request, "index.html", overview=view.overview(home, status() if status else None))

    def profile(request: Request) -> Response:
        name = request.path_params["name"]
        if not view.known_profile(home, name):
            return _missing(request, f"no profile {name!r} in {home.root}")
        points = view.progress(home, name)
        return _page(
            request,
            "profile.html",
            profile=name,
            archives=view.archives(home, name),
            points=points,
            chart=chart(points),
        )

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

    def guarded(page: Callable[[Request], Response]) -> Callable[[Request], Response]:
        def serve(request: Request) -> Response:
            try:
                return page(request)
            except (AgentdError, ImproverError, LedgerError) as exc:
                return _page(
                    request, "error.html", status_code=500, title="Something is wrong in the home", line=str(exc)
                )

        return serve

    return [
        Route("/", guarded(front), name="dashboard"),
        Route("/profiles/{name}", guarded(profile), name="profile"),
        Route("/ledger", guarded(ledger), name="ledger"),
        Route("/ledger/{pulse}", guarded(entry), name="entry"),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]


def _page(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
    return TEMPLATES.TemplateResponse(request, template, context, status_code=status_code)


def _missing(request: Request, line: str) -> Response:
    return _page(request, "error.html", status_code=404, title="Not found", line=line)


def _query(start: int, filters: dict[str, str | None]) -> str:
    """The query of the ledger page from Pulse `start`, with the filters that were given."""
    return urlencode({"from": start, **{name: value for name, value in filters.items() if value}})


def _number(text: str | None) -> int | None:
    """A Pulse as a page gives it: a whole number from 1, else None."""
    return int(text) if text and text.isascii() and text.isdigit() and 0 < len(text) < 19 and int(text) > 0 else None
