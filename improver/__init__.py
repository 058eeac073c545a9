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
    "RequestRefused": "base.protocol",
    "TokenUsage": "base.protocol",
    "completion_from_json": "base.protocol",
    "decode_line": "base.protocol",
    # JSON from outside, its nesting bounded
    "TooDeep": "base.nesting",
    "loads_bounded": "base.nesting",
    # what every HTTP server holds its clients to
    "HttpLimits": "base.serving",
    "ServerConfig": "base.serving",
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
    "TrialResult": "episodes.trials",
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
    # where a trial's runs run: here, or a worker elsewhere (improver.episodes.executors)
    "Candidate": "episodes.harness",
    "Command": "episodes.harness",
    "RUN_RETRIES": "episodes.harness:RETRIES",
    "run_task": "episodes.harness",
    "Executor": "episodes.executors",
    "ExecutorFailed": "episodes.executors",
    "LocalExecutor": "episodes.executors",
    "run_result_from_json": "episodes.executors:result_from_json",
    "run_result_to_json": "episodes.executors:result_to_json",
    "parse_task": "tasks.task",
    "Run": "tasks.runs",
    "Halted": "episodes.trials",
    "memoized_models": "episodes.trials:memoized",
    "TRIAL_CONCURRENCY": "episodes.trials:CONCURRENCY",
    "EnvSetup": "episodes.openenv",
    "QuietExit": "episodes.openenv",
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
    "record_exported": "train.export",
    # seals, the loop, lineage
    "Routes": "base.routes",
    "Seal": "seals.seal",
    "SealRequest": "seals.seal",
    "ShownTasks": "seals.seal",
    "claim_body": "seals.seal",
    "current_seal": "seals.seal",
    "make_seal": "seals.seal",
    "open_seal": "seals.seal",
    "code_word": "seals.seal",
    "seals_of": "seals.seal",
    "LEFT_OUT": "seals.separation",
    "Separation": "seals.separation",
    "seal_claims": "seals.separation",
    "DEFAULT_TEST": "decide.levels",
    "TESTS": "decide.levels",
    "Archive": "decide.archive",
    # the statistics as a decision line words them (the dashboard words lineage lines so)
    "wilson_interval": "decide.stats",
    "load_settings": "seals.settings",
    "save_settings": "seals.settings",
    "settings_text": "seals.settings",
    "Settings": "seals.settings",
    "SETTINGS_FILE": "seals.settings:FILE",
    "MetaLoop": "meta.metaloop",
    "REPLICATIONS": "meta.replications",
    "Problem": "meta.problems",
    "IMPROVER_KIND": "meta.judging:KIND",
    "load_problem": "meta.problems",
    "check_problems": "meta.problems",
    "check_improvers": "trust.audit",
    "Variant": "base.variant",
    "Event": "loop.record",
    "Interrupted": "loop.running",
    "BudgetTooSmall": "loop.running",
    "Loop": "loop.rounds",
    "Stop": "loop.running",
    "Trials": "loop.running",
    # the sealed tasks asked here, or by an examiner that holds them
    "SealedText": "loop.gates",
    "CanaryPassed": "loop.confirming",
    "Examination": "loop.confirming",
    "Examined": "loop.confirming",
    "LocalExamination": "loop.confirming",
    "SealedBaseline": "loop.confirming",
    "canary_examination": "loop.confirming",
    "examination_body": "loop.confirming",
    "examined_from": "loop.confirming",
    "turned_down_by_examiner": "loop.confirming",
    "EXAMINATION": "seals.claims",
    "EXAMINER_RECEIPT": "seals.claims:RECEIPT",
    "SEAL_CLAIM": "seals.claims:SEAL",
    "SEAL_RETIREMENT": "seals.claims:RETIREMENT",
    "SEAL_REVEAL": "seals.claims:REVEAL",
    "Revealed": "seals.reveal",
    "bundle_bytes": "seals.reveal",
    "read_revealed": "seals.reveal",
    "examination_of": "seals.claims",
    "examinations_on": "seals.claims",
    "seal_record": "seals.claims",
    "hand_over": "seals.seal",
    "Confirmation": "seals.seal",
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
    "seal_publisher": "seals.claims",
    # attesting a release, and releases and attestations as in-toto statements
    "AttestSetup": "trust.attest:Setup",
    "Finding": "trust.attest",
    "PublishedRelease": "code.release:Release",
    "Rebuild": "code.release",
    "published_release": "code.release:of_entry",
    "attest_release": "trust.attest:attest",
    "load_sealed": "trust.attest",
    "recipe_for": "code.release",
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
    "canonical": "base.digests",
    "utc_now": "base.clock",
    "append_line": "base.files",
    "read_lines": "base.files",
    "write_atomic": "base.files",
    # public benchmarks as tasks, and their authors' scorers beside agentd's
    "BFCL_SETS": "benchmarks.bfcl:SETS",
    "TAU2_DOMAINS": "benchmarks.tau2world:DOMAINS",
    "Imported": "benchmarks.packages",
    "Skipped": "benchmarks.packages",
    "import_bfcl_set": "benchmarks.bfcl:import_set",
    "import_tau2_domain": "benchmarks.tau2:import_domain",
    "bfcl_set_problem": "benchmarks.bfcl:set_problem",
    "tau2_domain_problem": "benchmarks.tau2:domain_problem",
}

__all__ = sorted(_SURFACE)
__getattr__, __dir__ = lazy(__name__, _SURFACE)


if TYPE_CHECKING:  # what a type checker and a reader see (`X as X`: exported); nothing is imported at run time
    from improver.base.clock import utc_now as utc_now
    from improver.base.digests import canonical as canonical, digest as digest
    from improver.base.errors import ImproverError as ImproverError
    from improver.base.files import append_line as append_line, read_lines as read_lines, write_atomic as write_atomic
    from improver.base.nesting import TooDeep as TooDeep, loads_bounded as loads_bounded
    from improver.base.protocol import (
        ASK_PERSON_TOOL as ASK_PERSON_TOOL,
        ENDINGS as ENDINGS,
        Agent as Agent,
        Budget as Budget,
        Case as Case,
        Completion as Completion,
        Ending as Ending,
        Episode as Episode,
        EpisodeLimits as EpisodeLimits,
        LimitReached as LimitReached,
        Model as Model,
        ModelMisconfigured as ModelMisconfigured,
        ProviderError as ProviderError,
        RequestRefused as RequestRefused,
        TokenUsage as TokenUsage,
        completion_from_json as completion_from_json,
        decode_line as decode_line,
        encode_line as encode_line,
    )
    from improver.base.routes import Routes as Routes
    from improver.base.serving import HttpLimits as HttpLimits, ServerConfig as ServerConfig
    from improver.base.variant import Variant as Variant
    from improver.benchmarks.bfcl import (
        SETS as BFCL_SETS,
        import_set as import_bfcl_set,
        set_problem as bfcl_set_problem,
    )
    from improver.benchmarks.packages import Imported as Imported, Skipped as Skipped
    from improver.benchmarks.tau2 import domain_problem as tau2_domain_problem, import_domain as import_tau2_domain
    from improver.benchmarks.tau2world import DOMAINS as TAU2_DOMAINS
    from improver.code.codeloop import CodeLoop as CodeLoop, Workshop as Workshop
    from improver.code.git import apply_to as apply_to, init_checkout as init_checkout
    from improver.code.patchlimits import (
        DEFAULT_ALLOW as DEFAULT_ALLOW,
        MAX_FILES as MAX_FILES,
        MAX_LINES as MAX_LINES,
        PatchLimits as PatchLimits,
    )
    from improver.code.release import (
        KIND as RELEASE_KIND,
        Commands as Commands,
        Rebuild as Rebuild,
        Release as PublishedRelease,
        of_entry as published_release,
        recipe_for as recipe_for,
        releases as releases_of,
    )
    from improver.decide.archive import Archive as Archive
    from improver.decide.levels import DEFAULT_TEST as DEFAULT_TEST, TESTS as TESTS
    from improver.decide.stats import (
        wilson_interval as wilson_interval,
    )
    from improver.episodes.env import run_episode as run_episode
    from improver.episodes.executors import (
        Executor as Executor,
        ExecutorFailed as ExecutorFailed,
        LocalExecutor as LocalExecutor,
        result_from_json as run_result_from_json,
        result_to_json as run_result_to_json,
    )
    from improver.episodes.harness import (
        RETRIES as RUN_RETRIES,
        Candidate as Candidate,
        Command as Command,
        ModelFactory as ModelFactory,
        RunResult as RunResult,
        run_task as run_task,
    )
    from improver.episodes.openenv import (
        DEFAULT_HOST as DEFAULT_ENV_HOST,
        DEFAULT_PORT as DEFAULT_ENV_PORT,
        IDLE_SECONDS as ENV_IDLE_SECONDS,
        MAX_SESSIONS as MAX_ENV_SESSIONS,
        EnvServer as EnvServer,
        EnvSetup as EnvSetup,
        QuietExit as QuietExit,
        address as env_address,
        listen as env_socket,
    )
    from improver.episodes.trials import (
        CONCURRENCY as TRIAL_CONCURRENCY,
        Halted as Halted,
        TrialResult as TrialResult,
        memoized as memoized_models,
    )
    from improver.episodes.validate import Validation as Validation, validate as validate_tasks
    from improver.loop.challenger import Challenger as Challenger
    from improver.loop.confirming import (
        CanaryPassed as CanaryPassed,
        Examination as Examination,
        Examined as Examined,
        LocalExamination as LocalExamination,
        SealedBaseline as SealedBaseline,
        canary_examination as canary_examination,
        examination_body as examination_body,
        examined_from as examined_from,
        turned_down_by_examiner as turned_down_by_examiner,
    )
    from improver.loop.gates import SealedText as SealedText
    from improver.loop.lineage import (
        Lineage as Lineage,
        improver_summary as improver_summary,
        summary as summary,
    )
    from improver.loop.practice import (
        Practice as Practice,
        PracticeRequest as PracticeRequest,
        Runner as PracticeRunner,
        with_practice as with_practice,
        write_practice as write_practice,
    )
    from improver.loop.record import Event as Event
    from improver.loop.rounds import Loop as Loop
    from improver.loop.running import (
        BudgetTooSmall as BudgetTooSmall,
        Interrupted as Interrupted,
        Stop as Stop,
        Trials as Trials,
    )
    from improver.loop.writing import SealReached as SealReached
    from improver.meta.judging import KIND as IMPROVER_KIND
    from improver.meta.metaloop import MetaLoop as MetaLoop
    from improver.meta.problems import (
        Problem as Problem,
        check_problems as check_problems,
        load_problem as load_problem,
    )
    from improver.meta.replications import REPLICATIONS as REPLICATIONS
    from improver.seals.claims import (
        ATTESTATION as ATTESTATION,
        EXAMINATION as EXAMINATION,
        RECEIPT as EXAMINER_RECEIPT,
        RETIREMENT as SEAL_RETIREMENT,
        REVEAL as SEAL_REVEAL,
        SEAL as SEAL_CLAIM,
        attestation_of as attestation_of,
        examination_of as examination_of,
        examinations_on as examinations_on,
        register as register_claims,
        release_claim_of as release_claim_of,
        seal_publisher as seal_publisher,
        seal_record as seal_record,
    )
    from improver.seals.reveal import Revealed as Revealed, bundle_bytes as bundle_bytes, read_revealed as read_revealed
    from improver.seals.seal import (
        Confirmation as Confirmation,
        Seal as Seal,
        SealRequest as SealRequest,
        ShownTasks as ShownTasks,
        claim_body as claim_body,
        code_word as code_word,
        current_seal as current_seal,
        hand_over as hand_over,
        make_seal as make_seal,
        open_seal as open_seal,
        seals_of as seals_of,
    )
    from improver.seals.separation import LEFT_OUT as LEFT_OUT, Separation as Separation, seal_claims as seal_claims
    from improver.seals.settings import (
        FILE as SETTINGS_FILE,
        Settings as Settings,
        load_settings as load_settings,
        save_settings as save_settings,
        settings_text as settings_text,
    )
    from improver.tasks.chat import text_of as text_of, transcript_problem as transcript_problem
    from improver.tasks.harvest import (
        HARVEST_PASS_OVER as HARVEST_PASS_OVER,
        Harvest as Harvest,
        Session as Session,
        harvest as harvest_sessions,
    )
    from improver.tasks.rubric import Rubric as Rubric, parse_rubric as parse_rubric
    from improver.tasks.runs import Run as Run
    from improver.tasks.simuser import continued as continued
    from improver.tasks.task import (
        MATCHES as MATCHES,
        Task as Task,
        TaskSet as TaskSet,
        load_tasks as load_tasks,
        parse_task as parse_task,
        tool_schema as tool_schema,
    )
    from improver.train.export import (
        ENVIRONMENTS as ENVIRONMENTS,
        EXPORT_PASS_OVER as EXPORT_PASS_OVER,
        SFT as SFT,
        SFT_VALIDATION as SFT_VALIDATION,
        TASKS as TASKS,
        VALIDATION_SHARE as VALIDATION_SHARE,
        Export as Export,
        ExportRecord as ExportRecord,
        Transcript as Transcript,
        check_out_dir as check_out_dir,
        export as export_work,
        read_exported as read_exported,
        record_exported as record_exported,
    )
    from improver.train.groups import GROUPS as GROUPS
    from improver.train.judge import (
        Judged as Judged,
        Proposal as Proposal,
        judge as judge_sessions,
        read_proposals as read_proposals,
        save_proposals as save_proposals,
    )
    from improver.train.passk import Evaluation as Evaluation, parse_ks as parse_ks, run_eval as run_eval
    from improver.trust.attest import (
        Finding as Finding,
        Setup as AttestSetup,
        attest as attest_release,
        load_sealed as load_sealed,
    )
    from improver.trust.audit import Report as LineageReport, check as check_lineage, check_improvers as check_improvers
    from improver.trust.install import (
        LEAST_BOND as LEAST_BOND,
        Review as InstallReview,
        Trust as Trust,
        install_release as install_release,
        installed as installed_release,
        review as review_install,
        undo_install as undo_install,
    )
    from improver.trust.intoto import (
        ATTESTATION_PREDICATE as ATTESTATION_PREDICATE,
        RELEASE_PREDICATE as RELEASE_PREDICATE,
        BadStatement as BadStatement,
        Verified as VerifiedStatement,
        envelope as statement_envelope,
        statement as statement_about,
        verify as verify_statement,
    )

    # Renamed imports are not exports to a type checker unless __all__ names them.
    __all__ += [
        "BFCL_SETS",
        "DEFAULT_ENV_HOST",
        "DEFAULT_ENV_PORT",
        "ENV_IDLE_SECONDS",
        "EXAMINER_RECEIPT",
        "IMPROVER_KIND",
        "MAX_ENV_SESSIONS",
        "RELEASE_KIND",
        "RUN_RETRIES",
        "SEAL_CLAIM",
        "SEAL_RETIREMENT",
        "SEAL_REVEAL",
        "SETTINGS_FILE",
        "TAU2_DOMAINS",
        "TRIAL_CONCURRENCY",
        "AttestSetup",
        "InstallReview",
        "LineageReport",
        "PracticeRunner",
        "PublishedRelease",
        "VerifiedStatement",
        "attest_release",
        "bfcl_set_problem",
        "check_lineage",
        "env_address",
        "env_socket",
        "export_work",
        "harvest_sessions",
        "import_bfcl_set",
        "import_tau2_domain",
        "installed_release",
        "judge_sessions",
        "memoized_models",
        "published_release",
        "register_claims",
        "releases_of",
        "review_install",
        "run_result_from_json",
        "run_result_to_json",
        "statement_about",
        "statement_envelope",
        "tau2_domain_problem",
        "validate_tasks",
        "verify_statement",
    ]
