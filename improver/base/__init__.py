"""What every room of the improver shares: content digests, time stamps, whole-file
writes, cross-process locks, errors, the paths under a home's `routes/`, the episode
protocol a candidate speaks, the variant a trial runs, and what every HTTP server holds its
clients to.

What other rooms and the face use; names load on first use (improver.base.faces).
"""

from __future__ import annotations

from improver.base.faces import lazy

_SURFACE = {
    "utc_now": "clock",
    "canonical": "digests",
    "digest": "digests",
    "ImproverError": "errors",
    "lazy": "faces",
    "append_line": "files",
    "read_lines": "files",
    "write_atomic": "files",
    "holding": "locks",
    "loads_bounded": "nesting",
    "TooDeep": "nesting",
    "Agent": "protocol",
    "ASK_PERSON_TOOL": "protocol",
    "Budget": "protocol",
    "Case": "protocol",
    "Completion": "protocol",
    "completion_from_json": "protocol",
    "completion_to_json": "protocol",
    "decode_line": "protocol",
    "DEFAULT_MAX_TOKENS": "protocol",
    "encode_line": "protocol",
    "Ending": "protocol",
    "ENDINGS": "protocol",
    "Episode": "protocol",
    "EpisodeLimits": "protocol",
    "LimitReached": "protocol",
    "Model": "protocol",
    "ModelMisconfigured": "protocol",
    "ProviderError": "protocol",
    "TokenUsage": "protocol",
    "Routes": "routes",
    "HttpLimits": "serving",
    "ServerConfig": "serving",
    "Variant": "variant",
}

__all__ = sorted(_SURFACE)
__getattr__, __dir__ = lazy(__name__, _SURFACE)
