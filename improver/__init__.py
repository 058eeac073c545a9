"""The improver: tasks from an agent's work, the harness that scores runs, seals, the
statistics and the loop that keeps only changes better beyond chance.

This is the surface other layers use (agentd, the benches); everything else in the
package is its own business. Names load on first use, so a command that needs only a
seal's file never pays for the statistics' imports.

improver/ never imports agentd/: the agent runtime and the models are injected, as the
`Agent` and `Model` protocols of improver.protocol.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Public name -> (module, its name there). No public name is a submodule's: once that
# submodule is imported, Python makes its name an attribute of the package, shadowing the
# function (so `harvest`, `validate` and `export` go out as harvest_sessions,
# validate_tasks and export_work).
_SURFACE: dict[str, tuple[str, str]] = {
    # the episode protocol: what a candidate, a model and an episode are
    "Agent": ("protocol", "Agent"),
    "ASK_PERSON_TOOL": ("protocol", "ASK_PERSON_TOOL"),
    "Budget": ("protocol", "Budget"),
    "Case": ("protocol", "Case"),
    "Completion": ("protocol", "Completion"),
    "ENDINGS": ("protocol", "ENDINGS"),
    "Ending": ("protocol", "Ending"),
    "Episode": ("protocol", "Episode"),
    # conversations: a simulated user goes on where the agent answered
    "continued": ("simuser", "continued"),
    "LimitReached": ("protocol", "LimitReached"),
    "EpisodeLimits": ("protocol", "EpisodeLimits"),
    "Model": ("protocol", "Model"),
    "ModelMisconfigured": ("protocol", "ModelMisconfigured"),
    "ProviderError": ("protocol", "ProviderError"),
    "TokenUsage": ("protocol", "TokenUsage"),
    "completion_from_json": ("protocol", "completion_from_json"),
    "decode_line": ("protocol", "decode_line"),
    "encode_line": ("protocol", "encode_line"),
    # tasks, harvest, validation, episodes, export
    "MATCHES": ("tasks", "MATCHES"),
    "Rubric": ("rubric", "Rubric"),
    "parse_rubric": ("rubric", "parse_rubric"),
    "Task": ("tasks", "Task"),
    "TaskSet": ("tasks", "TaskSet"),
    "load_tasks": ("tasks", "load_tasks"),
    "tool_schema": ("tasks", "tool_schema"),
    "HARVEST_PASS_OVER": ("harvest", "HARVEST_PASS_OVER"),
    "Harvest": ("harvest", "Harvest"),
    "Session": ("harvest", "Session"),
    "harvest_sessions": ("harvest", "harvest"),
    "Validation": ("validate", "Validation"),
    "validate_tasks": ("validate", "validate"),
    "ModelFactory": ("harness", "ModelFactory"),
    "run_episode": ("env", "run_episode"),
    "DEFAULT_ENV_HOST": ("openenv", "DEFAULT_HOST"),
    "DEFAULT_ENV_PORT": ("openenv", "DEFAULT_PORT"),
    "MAX_ENV_SESSIONS": ("openenv", "MAX_SESSIONS"),
    "ENV_IDLE_SECONDS": ("openenv", "IDLE_SECONDS"),
    "EnvServer": ("openenv", "EnvServer"),
    "Evaluation": ("passk", "Evaluation"),
    "Judged": ("judge", "Judged"),
    "Proposal": ("judge", "Proposal"),
    "judge_sessions": ("judge", "judge"),
    "read_proposals": ("judge", "read_proposals"),
    "save_proposals": ("judge", "save_proposals"),
    "parse_ks": ("passk", "parse_ks"),
    "run_eval": ("passk", "run_eval"),
    "RunResult": ("harness", "RunResult"),
    "EnvSetup": ("openenv", "EnvSetup"),
    "env_address": ("openenv", "address"),
    "env_socket": ("openenv", "listen"),
    "ENVIRONMENTS": ("export", "ENVIRONMENTS"),
    "GROUPS": ("groups", "GROUPS"),
    "EXPORT_PASS_OVER": ("export", "EXPORT_PASS_OVER"),
    "Export": ("export", "Export"),
    "ExportRecord": ("export", "ExportRecord"),
    "SFT": ("export", "SFT"),
    "SFT_VALIDATION": ("export", "SFT_VALIDATION"),
    "TASKS": ("export", "TASKS"),
    "Transcript": ("export", "Transcript"),
    "VALIDATION_SHARE": ("export", "VALIDATION_SHARE"),
    "check_out_dir": ("export", "check_out_dir"),
    "export_work": ("export", "export"),
    "read_exported": ("export", "read_exported"),
    # seals, the loop, lineage
    "Routes": ("routes", "Routes"),
    "Seal": ("seal", "Seal"),
    "SealRequest": ("seal", "SealRequest"),
    "ShownTasks": ("seal", "ShownTasks"),
    "claim_body": ("seal", "claim_body"),
    "current_seal": ("seal", "current_seal"),
    "make_seal": ("seal", "make_seal"),
    "open_seal": ("seal", "open_seal"),
    "seals_of": ("seal", "seals_of"),
    "LEFT_OUT": ("separation", "LEFT_OUT"),
    "Separation": ("separation", "Separation"),
    "seal_claims": ("separation", "seal_claims"),
    "TESTS": ("levels", "TESTS"),
    "Archive": ("archive", "Archive"),
    "load_settings": ("settings", "load_settings"),
    "save_settings": ("settings", "save_settings"),
    "settings_text": ("settings", "settings_text"),
    "Settings": ("settings", "Settings"),
    "SETTINGS_FILE": ("settings", "FILE"),
    "MetaLoop": ("metaloop", "MetaLoop"),
    "Problem": ("metaloop", "Problem"),
    "IMPROVER_KIND": ("metaloop", "KIND"),
    "load_problem": ("metaloop", "load_problem"),
    "check_problems": ("metaloop", "check_problems"),
    "check_improvers": ("lineage", "check_improvers"),
    "Variant": ("variant", "Variant"),
    "Event": ("loop", "Event"),
    "Interrupted": ("loop", "Interrupted"),
    "BudgetTooSmall": ("loop", "BudgetTooSmall"),
    "Loop": ("loop", "Loop"),
    "Stop": ("loop", "Stop"),
    "Challenger": ("challenger", "Challenger"),
    "Practice": ("practice", "Practice"),
    "PracticeRequest": ("practice", "PracticeRequest"),
    "PracticeRunner": ("practice", "Runner"),
    "SealReached": ("writing", "SealReached"),
    "with_practice": ("practice", "with_practice"),
    "write_practice": ("practice", "write_practice"),
    "CodeLoop": ("code", "CodeLoop"),
    "Workshop": ("code", "Workshop"),
    "Commands": ("release", "Commands"),
    "RELEASE_KIND": ("release", "KIND"),
    "releases_of": ("release", "releases"),
    "DEFAULT_ALLOW": ("patchlimits", "DEFAULT_ALLOW"),
    "MAX_FILES": ("patchlimits", "MAX_FILES"),
    "MAX_LINES": ("patchlimits", "MAX_LINES"),
    "PatchLimits": ("patchlimits", "PatchLimits"),
    "apply_to": ("git", "apply_to"),
    # installing a release: the installer's four checks, applying, taking it back out
    "LEAST_BOND": ("install", "LEAST_BOND"),
    "InstallReview": ("install", "Review"),
    "Trust": ("install", "Trust"),
    "install_release": ("install", "install_release"),
    "installed_release": ("install", "installed"),
    "review_install": ("install", "review"),
    "undo_install": ("install", "undo_install"),
    "init_checkout": ("git", "init_checkout"),
    "Lineage": ("lineage", "Lineage"),
    "LineageReport": ("lineage", "Report"),
    "check_lineage": ("lineage", "check"),
    "summary": ("lineage", "summary"),
    "improver_summary": ("lineage", "improver_summary"),
    "register_claims": ("claims", "register"),
    "ATTESTATION": ("claims", "ATTESTATION"),
    "attestation_of": ("claims", "attestation_of"),
    "release_claim_of": ("claims", "release_claim_of"),
    # attesting a release, and releases and attestations as in-toto statements
    "AttestSetup": ("attest", "Setup"),
    "Finding": ("attest", "Finding"),
    "PublishedRelease": ("release", "Release"),
    "published_release": ("release", "of_entry"),
    "attest_release": ("attest", "attest"),
    "load_sealed": ("attest", "load_sealed"),
    "recipe_for": ("attest", "recipe_for"),
    "ATTESTATION_PREDICATE": ("intoto", "ATTESTATION_PREDICATE"),
    "RELEASE_PREDICATE": ("intoto", "RELEASE_PREDICATE"),
    "BadStatement": ("intoto", "BadStatement"),
    "VerifiedStatement": ("intoto", "Verified"),
    "statement_about": ("intoto", "statement"),
    "statement_envelope": ("intoto", "envelope"),
    "verify_statement": ("intoto", "verify"),
    # what every layer above shares
    "ImproverError": ("errors", "ImproverError"),
    "text_of": ("chat", "text_of"),
    "transcript_problem": ("chat", "transcript_problem"),
    "digest": ("digests", "digest"),
    "utc_now": ("clock", "utc_now"),
    "append_line": ("files", "append_line"),
    "read_lines": ("files", "read_lines"),
    "write_atomic": ("files", "write_atomic"),
}

__all__ = sorted(_SURFACE)


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _SURFACE[name]
    except KeyError:
        raise AttributeError(f"module 'improver' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"improver.{module}"), attribute)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # what a type checker and a reader see; nothing is imported at run time
    from improver.archive import Archive
    from improver.attest import Finding, load_sealed, recipe_for
    from improver.attest import Setup as AttestSetup
    from improver.attest import attest as attest_release
    from improver.challenger import Challenger
    from improver.chat import text_of, transcript_problem
    from improver.claims import ATTESTATION, attestation_of, release_claim_of
    from improver.claims import register as register_claims
    from improver.clock import utc_now
    from improver.code import CodeLoop, Workshop
    from improver.digests import digest
    from improver.env import run_episode
    from improver.errors import ImproverError
    from improver.export import (
        ENVIRONMENTS,
        EXPORT_PASS_OVER,
        SFT,
        SFT_VALIDATION,
        TASKS,
        VALIDATION_SHARE,
        Export,
        ExportRecord,
        Transcript,
        check_out_dir,
        read_exported,
    )
    from improver.export import export as export_work
    from improver.files import append_line, read_lines, write_atomic
    from improver.git import apply_to, init_checkout
    from improver.groups import GROUPS
    from improver.harness import ModelFactory, RunResult
    from improver.harvest import HARVEST_PASS_OVER, Harvest, Session
    from improver.harvest import harvest as harvest_sessions
    from improver.install import LEAST_BOND, Trust, install_release, undo_install
    from improver.install import Review as InstallReview
    from improver.install import installed as installed_release
    from improver.install import review as review_install
    from improver.intoto import ATTESTATION_PREDICATE, RELEASE_PREDICATE, BadStatement
    from improver.intoto import Verified as VerifiedStatement
    from improver.intoto import envelope as statement_envelope
    from improver.intoto import statement as statement_about
    from improver.intoto import verify as verify_statement
    from improver.judge import Judged, Proposal, read_proposals, save_proposals
    from improver.judge import judge as judge_sessions
    from improver.levels import TESTS
    from improver.lineage import Lineage, check_improvers, improver_summary, summary
    from improver.lineage import Report as LineageReport
    from improver.lineage import check as check_lineage
    from improver.loop import BudgetTooSmall, Event, Interrupted, Loop, Stop
    from improver.metaloop import KIND as IMPROVER_KIND
    from improver.metaloop import MetaLoop, Problem, check_problems, load_problem
    from improver.openenv import DEFAULT_HOST as DEFAULT_ENV_HOST
    from improver.openenv import DEFAULT_PORT as DEFAULT_ENV_PORT
    from improver.openenv import IDLE_SECONDS as ENV_IDLE_SECONDS
    from improver.openenv import MAX_SESSIONS as MAX_ENV_SESSIONS
    from improver.openenv import EnvServer, EnvSetup
    from improver.openenv import address as env_address
    from improver.openenv import listen as env_socket
    from improver.passk import Evaluation, parse_ks, run_eval
    from improver.patchlimits import DEFAULT_ALLOW, MAX_FILES, MAX_LINES, PatchLimits
    from improver.practice import Practice, PracticeRequest, with_practice, write_practice
    from improver.practice import Runner as PracticeRunner
    from improver.protocol import (
        ASK_PERSON_TOOL,
        ENDINGS,
        Agent,
        Budget,
        Case,
        Completion,
        Ending,
        Episode,
        EpisodeLimits,
        LimitReached,
        Model,
        ModelMisconfigured,
        ProviderError,
        TokenUsage,
        completion_from_json,
        decode_line,
        encode_line,
    )
    from improver.release import KIND as RELEASE_KIND
    from improver.release import Commands
    from improver.release import Release as PublishedRelease
    from improver.release import of_entry as published_release
    from improver.release import releases as releases_of
    from improver.routes import Routes
    from improver.rubric import Rubric, parse_rubric
    from improver.seal import Seal, SealRequest, ShownTasks, claim_body, current_seal, make_seal, open_seal, seals_of
    from improver.separation import LEFT_OUT, Separation, seal_claims
    from improver.settings import FILE as SETTINGS_FILE
    from improver.settings import Settings, load_settings, save_settings, settings_text
    from improver.simuser import continued
    from improver.tasks import MATCHES, Task, TaskSet, load_tasks, tool_schema
    from improver.validate import Validation
    from improver.validate import validate as validate_tasks
    from improver.variant import Variant
    from improver.writing import SealReached
