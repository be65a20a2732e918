"""A channel's own model, persona and tools, as admins set them (issue 16), for every platform.

Kept in ``ChannelSettings`` under the channel's key (a thread follows its channel), by name:

    model      a name from the model catalogue (``models:`` in the config); unset: the default
    prompt     the persona, at most ``PERSONA_CHARS`` characters; unset: none
    tools_off  tool names turned off, comma-separated; unset: every tool on (a tool added later,
               an MCP server's say, starts on)
    memory     ``off``: runs here neither recall nor change memories (``core.memories``);
               unset: on

Reading never needs an admin; changing does (``adapters.dispatch``: ``Settings`` declares
it). The replies are ``adapters.words``' sentences; they name models and tools from the
config and registry, and a name someone typed only as ``words.typed_name`` shows it (bounded,
no markup), so a surface escapes them as any shared words.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from adapters import words
from adapters.live import VERBOSITIES, Verbosity
from core.errors import ReactbotError, StoreUnavailable
from core.llm import ChatModel
from core.prompt import PERSONA_CHARS
from core.stores import ChannelSettings
from core.tools import ToolRegistry

log = logging.getLogger(__name__)

DEFAULT = "default"
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
"""Control characters a persona never keeps (a line break and a tab it does)."""


class ChoiceError(ReactbotError):
    """A choice that cannot be made (an unknown model or tool); the message says why."""


@dataclass(frozen=True, slots=True)
class RunChoice:
    """What one run uses instead of the agent's defaults (None: the default)."""

    model: ChatModel | None = None
    tools: ToolRegistry | None = None
    persona: str = ""
    vision: bool = False
    """The run's model reads images (``vision: true`` in the config)."""
    off: frozenset[str] = frozenset()
    """Tools the channel turned off (lower-cased names)."""
    verbosity: Verbosity | None = None
    """What an admin set for the channel (None: the platform's default)."""
    memory: bool = True
    """The run may recall and change memories: the channel did not turn them off, and its
    model is not one the catalogue says must never receive them (``memory: false``)."""


@dataclass(slots=True)
class ChannelChoices:
    settings: ChannelSettings
    catalogue: Mapping[str, ChatModel] = field(default_factory=dict)
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    default_model: str = ""
    """The default model's name, to show in the settings."""
    vision: frozenset[str] = frozenset()
    """Catalogue names of the models that read images."""
    default_vision: bool = False
    """The default model reads images (``model.vision``)."""
    no_memory: frozenset[str] = frozenset()
    """Catalogue names of the models that must never receive memories (``memory: false``)."""

    # ---- reading ------------------------------------------------------------------------
    async def stored(self, key: str) -> dict[str, str]:
        try:
            return await self.settings.get(key)
        except StoreUnavailable:  # the defaults, rather than no answer
            return {}

    async def for_run(self, key: str, *, model: str | None = None) -> RunChoice:
        """The choices of channel ``key`` for one run; ``model``: the asker's pick for this
        question (``/ask model:``, ``--model``), which wins over the channel's.
        Raises ``ChoiceError`` for a ``model`` the catalogue does not have."""
        stored = await self.stored(key)
        chosen: ChatModel | None = None
        name = model if model is not None else stored.get("model")
        if model is not None:
            chosen = self.model(model)
        elif name is not None:
            chosen = self.catalogue.get(name)
            if chosen is None:  # taken out of the config since an admin chose it
                log.warning(
                    "channel %s: model %r is not in the catalogue; using the default", key, name
                )
        off = _names(stored.get("tools_off", ""))
        tools = self._subset(off) if off else None
        vision = name.strip() in self.vision if chosen is not None and name else self.default_vision
        persona = stored.get("prompt", "")
        memory = stored.get("memory") != "off" and not (chosen and name in self.no_memory)
        verbosity = verbosity_of(stored)
        return RunChoice(chosen, tools, persona, vision, frozenset(off), verbosity, memory)

    async def verbosity(self, key: str) -> Verbosity | None:
        """What an admin set for channel ``key`` (None: the platform's default)."""
        return verbosity_of(await self.stored(key))

    def model(self, name: str) -> ChatModel:
        found = self.catalogue.get(name.strip())
        if found is None:
            raise ChoiceError(words.no_such_model(name, sorted(self.catalogue)))
        return found

    def choices(self) -> str:
        return words.models_line(sorted(self.catalogue))

    def matching(self, typed: str) -> list[str]:
        """Catalogue names for autocomplete: those containing ``typed``, at most 25."""
        return _containing(sorted(self.catalogue), typed)

    def matching_tools(self, typed: str) -> list[str]:
        """Tool names for autocomplete, likewise."""
        return _containing([t.name for t in self.tools], typed)

    def _subset(self, off: set[str]) -> ToolRegistry:
        subset = ToolRegistry()
        for tool in self.tools:
            if tool.name.lower() not in off:
                subset.add(tool)
        return subset

    async def describe(self, key: str, default_verbosity: str) -> list[str]:
        """The settings, one line each, for ``settings``/``show``: verbosity, model, tools
        and the persona's length (never its text)."""
        stored = await self.stored(key)
        level = verbosity_of(stored)
        shown = f"{level} (set by an admin)" if level else f"{default_verbosity} (the default)"
        name = stored.get("model")
        model = f"{name} (set by an admin)" if name else f"{self.default_model or 'the default'}"
        prompt = stored.get("prompt", "")
        return [
            f"Verbosity: {shown}",
            f"Model: {model}",
            self._tools_line(stored),
            f"Persona: {len(prompt):,} characters" if prompt else "Persona: none",
        ]

    async def tools_line(self, key: str) -> str:
        """``Tools: search (off here: calculate)``."""
        return self._tools_line(await self.stored(key))

    def _tools_line(self, stored: dict[str, str]) -> str:
        off = _names(stored.get("tools_off", ""))
        on = [t.name for t in self.tools if t.name.lower() not in off]
        return words.tools_line(on, sorted(off))

    async def persona(self, key: str) -> str:
        return (await self.stored(key)).get("prompt", "")

    # ---- changing (admins: ``adapters.dispatch.handlers.settings``) ------------------------
    # Each returns the reply; raises ``ChoiceError`` for what cannot be chosen and
    # ``StoreUnavailable`` when the change could not be kept (nothing changed).
    async def set_model(self, key: str, name: str | None) -> str:
        name = (name or DEFAULT).strip()
        if name.lower() == DEFAULT:
            await self.settings.put(key, "model", None)
            return words.model_set(None)
        self.model(name)  # raises ChoiceError for an unknown name
        await self.settings.put(key, "model", name)
        return words.model_set(name)

    async def set_persona(self, key: str, text: str) -> str:
        text = _CONTROL.sub("", text).strip()
        if len(text) > PERSONA_CHARS:
            raise ChoiceError(words.persona_too_long(len(text), PERSONA_CHARS))
        await self.settings.put(key, "prompt", text or None)
        return words.persona_set(len(text))

    async def toggle_tool(self, key: str, name: str) -> str:
        tool = self.tools.get(name.strip()) if name.strip() else None
        if tool is None:
            raise ChoiceError(words.no_such_tool(name, [t.name for t in self.tools]))
        off = _names((await self.settings.get(key)).get("tools_off", ""))
        lowered = tool.name.lower()
        turned_on = lowered in off
        off = off - {lowered} if turned_on else off | {lowered}
        await self.settings.put(key, "tools_off", ",".join(sorted(off)) or None)
        return words.tool_now(tool.name, turned_on)


def verbosity_of(stored: dict[str, str]) -> Verbosity | None:
    level = stored.get("verbosity")
    return next((known for known in VERBOSITIES if level == known), None)


def _containing(names: list[str], typed: str) -> list[str]:
    needle = typed.strip().lower()
    return [n for n in names if needle in n.lower()][:25]


def _names(joined: str) -> set[str]:
    return {n.strip().lower() for n in joined.split(",") if n.strip()}
