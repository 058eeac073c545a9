"""Episodes: one candidate on one task, scored (errored is never failed); a variant's
trials over a task set; a task as an episode a trainer drives, over stdio or OpenEnv;
and validation (gold must pass, a no-op must fail).

What other rooms and the face use; names load on first use (improver.base.faces).
"""

from __future__ import annotations

from improver.base.faces import lazy

_SURFACE = {
    "run_episode": "env",
    "Candidate": "harness",
    "Command": "harness",
    "ModelFactory": "harness",
    "RETRIES": "harness",
    "run_cost": "harness",
    "run_task": "harness",
    "RunResult": "harness",
    "address": "openenv",
    "DEFAULT_HOST": "openenv",
    "DEFAULT_PORT": "openenv",
    "EnvServer": "openenv",
    "EnvSetup": "openenv",
    "IDLE_SECONDS": "openenv",
    "listen": "openenv",
    "MAX_SESSIONS": "openenv",
    "CONCURRENCY": "trials",
    "Halted": "trials",
    "run_trials": "trials",
    "TaskTally": "trials",
    "TrialResult": "trials",
    "Executor": "executors",
    "ExecutorFailed": "executors",
    "LocalExecutor": "executors",
    "result_from_json": "executors",
    "result_to_json": "executors",
    "CARELESS_RUN_PASSES": "validate",
    "check_task": "validate",
    "NO_RUN_PASSES": "validate",
    "refusal": "validate",
    "Validation": "validate",
}

__all__ = sorted(_SURFACE)
__getattr__, __dir__ = lazy(__name__, _SURFACE)
