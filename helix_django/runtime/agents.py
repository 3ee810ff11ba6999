"""Agents: name, provider + model, system prompt and tools, declared in ``HELIX["AGENTS"]``.

::

    HELIX = {"AGENTS": {"default": {
        "PROVIDER": {"BACKEND": "helix_django.runtime.providers.openai.OpenAIProvider",
                     "OPTIONS": {"BASE_URL": "http://localhost:11434/v1"}},
        "MODEL": "llama3.2", "SYSTEM_PROMPT": "...",
        "TOOLS": ["myapp.tools.search_docs"], "MAX_STEPS": 8, "MAX_ATTEMPTS": 1, "IDLE_TIMEOUT_SECONDS": 120}}}
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.utils.translation import gettext_lazy as _

from helix_django.conf import helix_settings, import_from_setting
from helix_django.errors import ValidationError
from helix_django.runtime.providers.base import BaseProvider, ToolSpec
from helix_django.runtime.tools import Tool, load_tools


@dataclasses.dataclass
class Agent:
    """A configured agent, built fresh for each run (so settings overrides apply)."""

    name: str
    provider: BaseProvider
    model: str
    system_prompt: str
    tools: dict[str, Tool]
    max_steps: int = 8
    """Model calls per run before the run ends with finish reason ``length``."""
    idle_timeout_seconds: float = 120.0
    """Seconds without a provider event before the stream counts as dropped."""
    max_attempts: int = 1
    """LLM attempts per step for a retryable provider failure (002, "Retried attempts").

    1 by default: re-asking the model is a regeneration, not a safe transport retry
    (000, "Recovery should have bounded automation")."""

    def tool_specs(self) -> list[ToolSpec]:
        """Return the tools offered to the model."""
        return [ToolSpec(t.name, t.description, t.parameters) for t in self.tools.values()]


class UnknownAgentError(ValidationError):
    """The session names an agent that ``HELIX["AGENTS"]`` does not declare."""

    default_message = _("Unknown agent")

    def __init__(self, message: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("cause", "agent_unknown")
        super().__init__(message, **kwargs)


def get_agent(name: str | None = None) -> Agent:
    """Build the agent ``name`` (default ``HELIX["DEFAULT_AGENT"]``). Raises UnknownAgentError."""
    name = name or helix_settings.DEFAULT_AGENT
    config = (helix_settings.AGENTS or {}).get(name)
    if not isinstance(config, dict):
        raise UnknownAgentError()
    provider_conf = config.get("PROVIDER") or {}
    backend = import_from_setting(
        provider_conf.get("BACKEND", "helix_django.runtime.providers.scripted.ScriptedProvider"),
        f"HELIX['AGENTS'][{name!r}]['PROVIDER']['BACKEND']",
    )
    return Agent(
        name=name,
        provider=backend(provider_conf.get("OPTIONS") or {}),
        model=str(config.get("MODEL", "")),
        system_prompt=str(config.get("SYSTEM_PROMPT", "")),
        tools=load_tools(config.get("TOOLS") or [], setting=f"HELIX['AGENTS'][{name!r}]['TOOLS']"),
        max_steps=int(config.get("MAX_STEPS", 8)),
        max_attempts=int(config.get("MAX_ATTEMPTS", 1)),
        idle_timeout_seconds=float(config.get("IDLE_TIMEOUT_SECONDS", 120)),
    )
