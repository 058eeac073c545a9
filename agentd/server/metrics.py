"""The daemon's counters, served at /metrics in Prometheus' text format (version 0.0.4).

A handful of series, kept in memory and written out by hand: requests by route and
status with their latency, entries appended and refused over HTTP, sessions taken in,
scheduled job runs by outcome, and the log's size.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

# Latency buckets, in seconds: from a cached read to a slow append under load.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

Labels = tuple[tuple[str, str], ...]


@dataclass
class _Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))
    total: int = 0
    sum: float = 0.0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(BUCKETS):
            if value <= bound:
                self.counts[i] += 1
        self.total += 1
        self.sum += value


class Metrics:
    """Thread-safe: requests are counted from the event loop and the worker threads."""

    HELP: ClassVar[dict[str, tuple[str, str]]] = {
        "agentd_http_requests_total": ("counter", "HTTP requests answered, by route and status"),
        "agentd_http_request_seconds": ("histogram", "Time to answer an HTTP request, by route"),
        "agentd_entries_appended_total": ("counter", "Signed entries recorded through POST /v1/entries"),
        "agentd_entries_refused_total": ("counter", "Signed entries POST /v1/entries refused, by reason"),
        "agentd_sessions_imported_total": ("counter", "Sessions recorded through POST /v1/sessions"),
        "agentd_job_runs_total": ("counter", "Scheduled job runs, by profile, job and result"),
        "agentd_ledger_entries": ("gauge", "Entries on the home's ledger"),
    }

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[Labels, float]] = defaultdict(lambda: defaultdict(float))
        self._histograms: dict[str, dict[Labels, _Histogram]] = defaultdict(lambda: defaultdict(_Histogram))
        self._gauges: dict[str, Callable[[], float]] = {}

    def count(self, name: str, amount: float = 1, **labels: str) -> None:
        with self._lock:
            self._counters[name][tuple(sorted(labels.items()))] += amount

    def observe(self, name: str, value: float, **labels: str) -> None:
        with self._lock:
            self._histograms[name][tuple(sorted(labels.items()))].observe(value)

    def gauge(self, name: str, read: Callable[[], float]) -> None:
        """A value read when /metrics is asked for."""
        self._gauges[name] = read

    def text(self) -> str:
        lines: list[str] = []
        with self._lock:
            for name, series in sorted(self._counters.items()):
                _header(lines, name)
                lines += [f"{name}{_labels(labels)} {_number(value)}" for labels, value in sorted(series.items())]
            for name, hists in sorted(self._histograms.items()):
                _header(lines, name)
                for labels, hist in sorted(hists.items()):
                    lines += _histogram(name, labels, hist)
        for name, read in sorted(self._gauges.items()):
            _header(lines, name)
            lines.append(f"{name} {_number(read())}")
        return "\n".join(lines) + "\n"


def _header(lines: list[str], name: str) -> None:
    kind, text = Metrics.HELP[name]
    lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]


def _histogram(name: str, labels: Labels, hist: _Histogram) -> list[str]:
    lines = [
        f"{name}_bucket{_labels((*labels, ('le', _number(b))))} {c}" for b, c in zip(BUCKETS, hist.counts, strict=False)
    ]
    lines.append(f"{name}_bucket{_labels((*labels, ('le', '+Inf')))} {hist.total}")
    lines.append(f"{name}_sum{_labels(labels)} {_number(hist.sum)}")
    lines.append(f"{name}_count{_labels(labels)} {hist.total}")
    return lines


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    escaped = (v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"') for _, v in labels)
    return "{" + ",".join(f'{k}="{v}"' for (k, _), v in zip(labels, escaped, strict=False)) + "}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
