"""A profile's lineage as this home holds it, and its proof against the ledger: what
`agentd lineage` shows and `--check` proves, reading alone; the improvers it kept
(`improve improver`) are held to their claims too."""

from __future__ import annotations

from typing import Any

from agentd.app.adopt import lineage_of
from agentd.app.ledger import open_ledger
from agentd.app.remote import open_remote
from agentd.app.seals import settle_seals
from agentd.errors import AgentdError, NotFound
from agentd.home import Home
from agentd.profiles import check_name, profile_dir
from agentd.wallets import wallet_names
from improver import ImproverError, Lineage, LineageReport, check_improvers, check_lineage as check_kept, open_seal


def lineage_here(home: Home, profile: str) -> Lineage:
    """The profile's lineage, for `lineage`: a name this home knows nothing of (no
    profile, lineage or seal: an auditor's copy may hold only the last two) is an error."""
    check_name(profile)
    routes = home.routes
    if (
        not profile_dir(home, profile).is_dir()
        and not routes.lineage(profile).exists()
        and not routes.sealed_files(profile)
    ):
        raise NotFound(
            f"profile {profile!r} has no profile, lineage or seal in {home.root}",
            f"no profile, lineage or seal named {profile!r}",
        )
    return lineage_of(home, profile)


def improvers_kept(home: Home, profile: str) -> list[dict[str, Any]]:
    """The profile's kept improvers (`improve improver`), oldest first."""
    try:
        return [line for _, line in Lineage(home.routes.improvers(profile)).lines() if line["decision"] == "kept"]
    except ImproverError as exc:
        raise AgentdError(str(exc)) from None


def check_lineage(home: Home, profile: str, remote: str | None = None) -> LineageReport:
    """Proves the profile's kept changes against the ledger, reading alone (an auditor's
    copy may be read-only), or against the ledger a daemon serves at `remote`. A seal
    file that does not open (changed, damaged) is one of the problems the check names,
    never a reason it cannot run."""
    lineage = lineage_here(home, profile)
    settle_seals(home)
    paths = sorted(home.routes.sealed_files(profile))
    seals, broken = {}, []
    for path in paths:
        try:
            seal = open_seal(path)
        except ImproverError as exc:
            broken.append(str(exc))
            continue
        seals[seal.id] = seal
    with open_remote(remote) if remote else open_ledger(home, check=False, read_only=True) as ledger:
        report = check_kept(lineage, profile, ledger, seals)
        if report.verified:
            authors = wallet_names(home, skip=lambda _: None)  # an unreadable wallet file is another command's error
            improvers = check_improvers(Lineage(home.routes.improvers(profile)), profile, ledger, authors)
            report.lines += improvers.lines
            report.problems += improvers.problems
    report.problems[:0] = broken
    return report
