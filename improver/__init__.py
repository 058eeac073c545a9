"""The improver: tasks from an agent's work, the harness that scores runs, seals, the
statistics and the loop that keeps only changes better beyond chance.

This is the surface other layers use (agentd, the benches); everything else in the
package is its own business. Names load on first use, so a command that needs only a
seal's file never pays for the statistics' imports.

improver/ never imports agentd/: the agent runtime and the models are injected, as the
`Agent` and `Model` protocols of improver.base.protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from improver.base.faces import lazy

# Public name -> "room.module", or "room.module:its name there". No public name is a
# room's or a module's: once imported, Python makes a submodule an attribute of its
# package, shadowing a function of that name (so `harvest`, `validate` and `export` go
# out as harvest_sessions, validate_tasks and export_work).
_SURFACE: dict[str, str] = {
    # the episode protocol: what a candidate, a model and an episode are
    "Agent": "base.protocol",
    "ASK_PERSON_TOOL": "base.protocol",
    "Budget": "base.protocol",
    "Case": "base.protocol",
    "Completion": "base.protocol",
    "ENDINGS": "base.protocol",
    "Ending": "base.protocol",
    "Episode": "base.protocol",
    # conversations: a simulated user goes on where the agent answered
    "continued": "tasks.simuser",
    "LimitReached": "base.protocol",
    "EpisodeLimits": "base.protocol",
    "Model": "base.protocol",
    "ModelMisconfigured": "base.protocol",
    "ProviderError": "base.protocol",
    "TokenUsage": "base.protocol",
    "completion_from_json": "base.protocol",
    "decode_line": "base.protocol",
    "encode_line": "base.protocol",
    # tasks, harvest, validation, episodes, export
    "MATCHES": "tasks.task",
    "Rubric": "tasks.rubric",
    "parse_rubric": "tasks.rubric",
    "Task": "tasks.task",
    "TaskSet": "tasks.task",
    "load_tasks": "tasks.task",
    "tool_schema": "tasks.task",
    "HARVEST_PASS_OVER": "tasks.harvest",
    "Harvest": "tasks.harvest",
    "Session": "tasks.harvest",
    "harvest_sessions": "tasks.harvest:harvest",
    "Validation": "episodes.validate",
    "validate_tasks": "episodes.validate:validate",
    "ModelFactory": "episodes.harness",
    "run_episode": "episodes.env",
    "DEFAULT_ENV_HOST": "episodes.openenv:DEFAULT_HOST",
    "DEFAULT_ENV_PORT": "episodes.openenv:DEFAULT_PORT",
    "MAX_ENV_SESSIONS": "episodes.openenv:MAX_SESSIONS",
    "ENV_IDLE_SECONDS": "episodes.openenv:IDLE_SECONDS",
    "EnvServer": "episodes.openenv",
    "Evaluation": "train.passk",
    "Judged": "train.judge",
    "Proposal": "train.judge",
    "judge_sessions": "train.judge:judge",
    "read_proposals": "train.judge",
    "save_proposals": "train.judge",
    "parse_ks": "train.passk",
    "run_eval": "train.passk",
    "RunResult": "episodes.harness",
    "EnvSetup": "episodes.openenv",
    "env_address": "episodes.openenv:address",
    "env_socket": "episodes.openenv:listen",
    "ENVIRONMENTS": "train.export",
    "GROUPS": "train.groups",
    "EXPORT_PASS_OVER": "train.export",
    "Export": "train.export",
    "ExportRecord": "train.export",
    "SFT": "train.export",
    "SFT_VALIDATION": "train.export",
    "TASKS": "train.export",
    "Transcript": "train.export",
    "VALIDATION_SHARE": "train.export",
    "check_out_dir": "train.export",
    "export_work": "train.export:export",
    "read_exported": "train.export",
    # seals, the loop, lineage
    "Routes": "base.routes",
    "Seal": "seals.seal",
    "SealRequest": "seals.seal",
    "ShownTasks": "seals.seal",
    "claim_body": "seals.seal",
    "current_seal": "seals.seal",
    "make_seal": "seals.seal",
    "open_seal": "seals.seal",
    "seals_of": "seals.seal",
    "LEFT_OUT": "seals.separation",
    "Separation": "seals.separation",
    "seal_claims": "seals.separation",
    "TESTS": "decide.levels",
    "Archive": "decide.archive",
    "load_settings": "seals.settings",
    "save_settings": "seals.settings",
    "settings_text": "seals.settings",
    "Settings": "seals.settings",
    "SETTINGS_FILE": "seals.settings:FILE",
    "MetaLoop": "meta.metaloop",
    "Problem": "meta.metaloop",
    "IMPROVER_KIND": "meta.metaloop:KIND",
    "load_problem": "meta.metaloop",
    "check_problems": "meta.metaloop",
    "check_improvers": "trust.audit",
    "Variant": "base.variant",
    "Event": "loop.rounds",
    "Interrupted": "loop.rounds",
    "BudgetTooSmall": "loop.rounds",
    "Loop": "loop.rounds",
    "Stop": "loop.rounds",
    "Challenger": "loop.challenger",
    "Practice": "loop.practice",
    "PracticeRequest": "loop.practice",
    "PracticeRunner": "loop.practice:Runner",
    "SealReached": "loop.writing",
    "with_practice": "loop.practice",
    "write_practice": "loop.practice",
    "CodeLoop": "code.codeloop",
    "Workshop": "code.codeloop",
    "Commands": "code.release",
    "RELEASE_KIND": "code.release:KIND",
    "releases_of": "code.release:releases",
    "DEFAULT_ALLOW": "code.patchlimits",
    "MAX_FILES": "code.patchlimits",
    "MAX_LINES": "code.patchlimits",
    "PatchLimits": "code.patchlimits",
    "apply_to": "code.git",
    # installing a release: the installer's four checks, applying, taking it back out
    "LEAST_BOND": "trust.install",
    "InstallReview": "trust.install:Review",
    "Trust": "trust.install",
    "install_release": "trust.install",
    "installed_release": "trust.install:installed",
    "review_install": "trust.install:review",
    "undo_install": "trust.install",
    "init_checkout": "code.git",
    "Lineage": "loop.lineage",
    "LineageReport": "trust.audit:Report",
    "check_lineage": "trust.audit:check",
    "summary": "loop.lineage",
    "improver_summary": "loop.lineage",
    "register_claims": "seals.claims:register",
    "ATTESTATION": "seals.claims",
    "attestation_of": "seals.claims",
    "release_claim_of": "seals.claims",
    # attesting a release, and releases and attestations as in-toto statements
    "AttestSetup": "trust.attest:Setup",
    "Finding": "trust.attest",
    "PublishedRelease": "code.release:Release",
    "published_release": "code.release:of_entry",
    "attest_release": "trust.attest:attest",
    "load_sealed": "trust.attest",
    "recipe_for": "trust.attest",
    "ATTESTATION_PREDICATE": "trust.intoto",
    "RELEASE_PREDICATE": "trust.intoto",
    "BadStatement": "trust.intoto",
    "VerifiedStatement": "trust.intoto:Verified",
    "statement_about": "trust.intoto:statement",
    "statement_envelope": "trust.intoto:envelope",
    "verify_statement": "trust.intoto:verify",
    # what every layer above shares
    "ImproverError": "base.errors",
    "text_of": "tasks.chat",
    "transcript_problem": "tasks.chat",
    "digest": "base.digests",
    "utc_now": "base.clock",
    "append_line": "base.files",
    "read_lines": "base.files",
    "write_atomic": "base.files",
}

__all__ = sorted(_SURFACE)
__getattr__, __dir__ = lazy(__name__, _SURFACE)


if TYPE_CHECKING:  # what a type checker and a reader see; nothing is imported at run time
    from improver.base.clock import utc_now
    from improver.base.digests import digest
    from improver.base.errors import ImproverError
    from improver.base.files import append_line, read_lines, write_atomic
    from improver.base.protocol import (
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
    from improver.base.routes import Routes
    from improver.base.variant import Variant
    from improver.code.codeloop import CodeLoop, Workshop
    from improver.code.git import apply_to, init_checkout
    from improver.code.patchlimits import DEFAULT_ALLOW, MAX_FILES, MAX_LINES, PatchLimits
    from improver.code.release import KIND as RELEASE_KIND
    from improver.code.release import Commands
    from improver.code.release import Release as PublishedRelease
    from improver.code.release import of_entry as published_release
    from improver.code.release import releases as releases_of
    from improver.decide.archive import Archive
    from improver.decide.levels import TESTS
    from improver.episodes.env import run_episode
    from improver.episodes.harness import ModelFactory, RunResult
    from improver.episodes.openenv import DEFAULT_HOST as DEFAULT_ENV_HOST
    from improver.episodes.openenv import DEFAULT_PORT as DEFAULT_ENV_PORT
    from improver.episodes.openenv import IDLE_SECONDS as ENV_IDLE_SECONDS
    from improver.episodes.openenv import MAX_SESSIONS as MAX_ENV_SESSIONS
    from improver.episodes.openenv import EnvServer, EnvSetup
    from improver.episodes.openenv import address as env_address
    from improver.episodes.openenv import listen as env_socket
    from improver.episodes.validate import Validation
    from improver.episodes.validate import validate as validate_tasks
    from improver.loop.challenger import Challenger
    from improver.loop.lineage import Lineage, improver_summary, summary
    from improver.loop.practice import Practice, PracticeRequest, with_practice, write_practice
    from improver.loop.practice import Runner as PracticeRunner
    from improver.loop.rounds import BudgetTooSmall, Event, Interrupted, Loop, Stop
    from improver.loop.writing import SealReached
    from improver.meta.metaloop import KIND as IMPROVER_KIND
    from improver.meta.metaloop import MetaLoop, Problem, check_problems, load_problem
    from improver.seals.claims import ATTESTATION, attestation_of, release_claim_of
    from improver.seals.claims import register as register_claims
    from improver.seals.seal import (
        Seal,
        SealRequest,
        ShownTasks,
        claim_body,
        current_seal,
        make_seal,
        open_seal,
        seals_of,
    )
    from improver.seals.separation import LEFT_OUT, Separation, seal_claims
    from improver.seals.settings import FILE as SETTINGS_FILE
    from improver.seals.settings import Settings, load_settings, save_settings, settings_text
    from improver.tasks.chat import text_of, transcript_problem
    from improver.tasks.harvest import HARVEST_PASS_OVER, Harvest, Session
    from improver.tasks.harvest import harvest as harvest_sessions
    from improver.tasks.rubric import Rubric, parse_rubric
    from improver.tasks.simuser import continued
    from improver.tasks.task import MATCHES, Task, TaskSet, load_tasks, tool_schema
    from improver.train.export import (
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
    from improver.train.export import export as export_work
    from improver.train.groups import GROUPS
    from improver.train.judge import Judged, Proposal, read_proposals, save_proposals
    from improver.train.judge import judge as judge_sessions
    from improver.train.passk import Evaluation, parse_ks, run_eval
    from improver.trust.attest import Finding, load_sealed, recipe_for
    from improver.trust.attest import Setup as AttestSetup
    from improver.trust.attest import attest as attest_release
    from improver.trust.audit import Report as LineageReport
    from improver.trust.audit import check as check_lineage
    from improver.trust.audit import check_improvers
    from improver.trust.install import LEAST_BOND, Trust, install_release, undo_install
    from improver.trust.install import Review as InstallReview
    from improver.trust.install import installed as installed_release
    from improver.trust.install import review as review_install
    from improver.trust.intoto import ATTESTATION_PREDICATE, RELEASE_PREDICATE, BadStatement
    from improver.trust.intoto import Verified as VerifiedStatement
    from improver.trust.intoto import envelope as statement_envelope
    from improver.trust.intoto import statement as statement_about
    from improver.trust.intoto import verify as verify_statement
