"""Where providers find their endpoint, key and retry policy: the environment, then
config.toml.

    [openai]                # or [anthropic]; OPENAI_* / ANTHROPIC_* variables win
    base_url = "http://127.0.0.1:11434/v1"
    api_key = "..."

    [providers]             # the retry policy, the same for every provider
    attempts = 4            # tries per model call, the first included
    backoff = 0.5           # seconds before the second try, doubled after each
    backoff_cap = 8.0       # the longest wait between two tries
    timeout = 120.0         # seconds a try may wait to connect, or for the next bytes

A base URL must be an http:// or https:// URL with a host, and a key printable ASCII
without spaces (it goes in a header; a pasted newline is the usual slip); either is
refused when the model is made, naming the variable or setting it came from.

A key is required unless a base URL is set: the official endpoints always want one,
while a local server (Ollama, vLLM, llama.cpp) usually wants none. A key-less endpoint
is sent the placeholder key `agentd-no-key` (`KEYLESS`), which such servers ignore; one
that does check keys answers 401, and the call fails with a message that names the
variable to set.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from agentd.errors import AgentdError
from agentd.home import Home
from agentd.providers.retry import RetryPolicy

KEYLESS = "agentd-no-key"
SCHEMES = ("http", "https")


@dataclass(frozen=True)
class Endpoint:
    api_key: str
    base_url: str | None
    key_hint: str  # what to tell the user when the server refuses the key


def endpoint(home: Home, spec: str, section: str, prefix: str) -> Endpoint:
    """The endpoint of provider `section`, whose variables start with `prefix`."""
    key_var, url_var = f"{prefix}_API_KEY", f"{prefix}_BASE_URL"
    api_key = _text_setting(home, section, "api_key", key_var)
    base_url = _text_setting(home, section, "base_url", url_var)
    if base_url:
        _check_url(base_url, _origin(home, section, "base_url", url_var))
    if api_key:
        _check_key(api_key, _origin(home, section, "api_key", key_var))
    where = f"{key_var} (or api_key under [{section}] in {home.config_path})"
    if not api_key and not base_url:
        raise AgentdError(f"{spec} needs an API key: set {where}")
    if not api_key:
        return Endpoint(KEYLESS, base_url, f"the server at {base_url} wants a key: set {where}")
    return Endpoint(api_key, base_url, f"check {where}")


def _origin(home: Home, section: str, key: str, env: str) -> str:
    """Where a setting's value came from, in the words an error uses."""
    return env if os.environ.get(env) else f"{key} under [{section}] in {home.config_path}"


def _check_key(key: str, where: str) -> None:
    """Refuses a key that cannot go in an HTTP header (a pasted newline, a quote mark):
    the request could not be sent, and retrying would not mend it."""
    bad = next((c for c in key if not c.isascii() or not c.isprintable() or c.isspace()), None)
    if bad is not None:
        raise AgentdError(f"{where} holds {bad!r}, which an API key never does; set it to the key alone")


def _check_url(url: str, where: str) -> None:
    """Refuses a base URL the HTTP client would choke on, or retry as a failed connection."""
    example = "like http://127.0.0.1:8000"
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is not a number fails only when read
    except ValueError as exc:
        raise AgentdError(f"{where} is not a valid URL ({exc}): {url!r}; give one {example}") from None
    if parts.scheme not in SCHEMES:
        raise AgentdError(f"{where} must start with http:// or https://, not {url!r}; give one {example}")
    if not parts.hostname:
        raise AgentdError(f"{where} names no host: {url!r}; give one {example}")


# What each [providers] setting must be, in the words an error uses.
POLICY_SETTINGS = {
    "attempts": "a whole number of at least 1",
    "backoff": "a number of seconds, 0 or more",
    "backoff_cap": "a number of seconds, 0 or more",
    "timeout": "a number of seconds above 0",
}


def retry_policy(home: Home) -> RetryPolicy:
    """The [providers] retry policy, each value checked; defaults for what is unset."""
    section = home.config.get("providers", {})
    if not isinstance(section, dict):
        raise AgentdError(f"{home.config_path}: 'providers' must be a table ([providers])")
    for name, value in section.items():
        if name not in POLICY_SETTINGS:
            allowed = ", ".join(POLICY_SETTINGS)
            raise AgentdError(f"{home.config_path}: [providers] has no setting {name!r}; the settings are {allowed}")
        if not _valid(name, value):
            raise AgentdError(f"{home.config_path}: [providers] {name} must be {POLICY_SETTINGS[name]}, not {value!r}")
    return RetryPolicy(**section)


def _valid(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return False
    if name == "attempts":
        return isinstance(value, int) and value >= 1
    if not isinstance(value, (int, float)):
        return False
    return value > 0 if name == "timeout" else value >= 0


def _text_setting(home: Home, section: str, key: str, env: str) -> str | None:
    value = home.setting(section, key, env=env)
    if value is not None and not isinstance(value, str):
        raise AgentdError(f"{home.config_path}: [{section}] {key} must be a string, not {value!r}")
    return value or None


def flag_setting(home: Home, section: str, key: str, *, default: bool) -> bool:
    """A true/false setting under [section]; `default` when unset."""
    value = home.setting(section, key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise AgentdError(f"{home.config_path}: [{section}] {key} must be true or false, not {value!r}")
    return value


def int_setting(home: Home, section: str, key: str, *, lowest: int, highest: int) -> int | None:
    """A whole-number setting under [section], within [lowest, highest]; None when unset."""
    value = home.setting(section, key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lowest <= value <= highest:
        raise AgentdError(
            f"{home.config_path}: [{section}] {key} must be a whole number from {lowest} to {highest}, not {value!r}"
        )
    return value
