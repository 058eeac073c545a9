"""Model providers: what answers the agent's chat messages, named `provider:model`.

- `openai:MODEL`: an OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, Ollama,
  llama.cpp, ...), `agentd.providers.openai`;
- `anthropic:MODEL`: Anthropic's Messages API, `agentd.providers.anthropic`;
- `script:PATH`: a rules file that answers by matching the conversation,
  `agentd.providers.script`.

Each is an `improver.base.protocol.Model`. Network providers retry under one policy
(`agentd.providers.retry`) and then raise ProviderError; keys and endpoints come from
the environment or config.toml (`agentd.providers.settings`).
"""

from __future__ import annotations

from pathlib import Path

from agentd.errors import AgentdError
from agentd.home import Home
from agentd.providers.script import load_script
from agentd.providers.settings import endpoint, retry_policy
from improver import Model

PROVIDERS = ("openai", "anthropic", "script")
FORMS = "openai:MODEL, anthropic:MODEL or script:PATH"


def make_model(spec: str, home: Home, *, base_dir: Path | None = None) -> Model:
    """The model `spec` names. A `script:` path that is not absolute is taken from
    `base_dir` (a profile's folder), else from the working directory. Raises AgentdError
    for a malformed spec, an unknown provider, a missing key or a bad rules file."""
    provider, sep, model = spec.partition(":")
    if not sep or not model.strip():
        raise AgentdError(f"{spec!r} is not a model; name one as {FORMS}")
    if provider not in PROVIDERS:
        raise AgentdError(
            f"unknown provider {provider!r} in {spec!r}; the providers are {', '.join(PROVIDERS)} ({FORMS})"
        )
    if provider == "script":
        path = Path(model).expanduser()
        return load_script(spec, path if path.is_absolute() else (base_dir or Path.cwd()) / path)
    # httpx is imported only when a model needs it: commands that make none skip it.
    if provider == "openai":
        from agentd.providers.openai import OpenAIModel

        return OpenAIModel(spec, model, endpoint(home, spec, "openai", "OPENAI"), retry_policy(home))
    from agentd.providers.anthropic import AnthropicModel

    return AnthropicModel(spec, model, endpoint(home, spec, "anthropic", "ANTHROPIC"), retry_policy(home))
