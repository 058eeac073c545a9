"""A candidate that takes cases in turn on one stdin: each case run as `agentd case --stdio`
runs its one, and `done` said for it, then the next case read; it ends at the end of its
input. The episode protocol has no such candidate (a candidate process runs one case):
bench/episodes.py runs this one to measure what a process for many cases would cost.

    python3 bench/serialcase.py < LINES    # with agentd importable (PYTHONPATH)
"""

from __future__ import annotations

import sys

from agentd.app.case import HarnessGone, StdioEpisode, finished
from agentd.runtime import run_case
from improver import Case


def main() -> None:
    episode = StdioEpisode(sys.stdin.buffer, sys.stdout.buffer)
    while True:
        try:
            _, case = episode.receive()
        except HarnessGone:
            return
        ending = finished(run_case(Case.from_json(case), episode))
        episode.send("done", {"answer": ending.answer})


if __name__ == "__main__":
    main()
