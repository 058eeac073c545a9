"""Model providers: what answers the agent's chat messages, named `provider:model`.

- `openai:MODEL`: an OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, Ollama,
  llama.cpp, ...), `agentd.providers.openai`;
- `anthropic:MODEL`: Anthropic's Messages API, `agentd.providers.anthropic`;
- `local:NAME` or `local:PATH.gguf`: a model run on this machine by llama.cpp (the
  `agentd[local]` extra), `agentd.providers.local`;
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
from agentd.providers.settings import endpoint, flag_setting, retry_policy
from improver import Model

PROVIDERS = ("openai", "anthropic", "local", "script")
FORMS = "openai:MODEL, anthropic:MODEL, local:NAME, local:PATH.gguf or script:PATH"


def make_model(spec: str, home: Home, *, base_dir: Path | None = None) -> Model:
    """The model `spec` names. A `script:` or `local:` path that is not absolute is taken from
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
    if provider == "local":
        from agentd.providers.local import make_local

        return make_local(spec, model, home, retry_policy(home), base_dir)
    if provider == "openai":
        from agentd.providers.openai import OpenAIModel

        text_calls = flag_setting(home, "openai", "text_tool_calls", default=False)
        named = endpoint(home, spec, "openai", "OPENAI")
        return OpenAIModel(spec, model, named, retry_policy(home), text_tool_calls=text_calls)
    from agentd.providers.anthropic import AnthropicModel

    return AnthropicModel(spec, model, endpoint(home, spec, "anthropic", "ANTHROPIC"), retry_policy(home))
