"""``remember`` and ``forget``: the only way memories change (issue 43), bound to one run's
asker (``core.memories.Asking``), so a run can write and delete only what its asker may.

They run like every tool: the trace shows each call, its input and its Observation, and
``agent.approval.tools`` may make either wait for a person's approval. Refusals (too long,
a channel memory from someone who is not its admin, a holder at its limit, nothing that
matches) are ``ToolError``s: the model reads why and says so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ParamSpec

from core.errors import StoreUnavailable, ToolError
from core.memories import HIDDEN_HERE, Asking, Memories, Memory, Scope, quoted, shown_here
from core.tools.base import FunctionTool, Tool

REMEMBER = "remember"
FORGET = "forget"
NAMES = frozenset({REMEMBER, FORGET})

_SCOPES: dict[str, Scope] = {"me": "person", "channel": "channel"}

P = ParamSpec("P")


def _stored(work: Callable[P, Awaitable[str]]) -> Callable[P, Awaitable[str]]:
    """A store that does not answer is said to the model in one line, as a tool error."""

    async def guarded(*args: P.args, **kwargs: P.kwargs) -> str:
        try:
            return await work(*args, **kwargs)
        except StoreUnavailable as exc:
            raise ToolError("The memory store is unavailable: nothing changed. Try later.") from exc

    return guarded


def _named(memory: Memory, asking: Asking) -> str:
    """A forgotten memory as the trace here may show it (``core.memories.shown_here``)."""
    if shown_here(memory, asking):
        return f"{memory.id} ({quoted(memory.text)})"
    return f"{memory.id} {HIDDEN_HERE}"


def memory_tools(memories: Memories, asking: Asking, *, trace: str) -> list[Tool]:
    """The two tools, acting as ``asking`` for the run ``trace``."""

    @_stored
    async def remember(fact: str, scope: str = "me") -> str:
        if scope not in _SCOPES:
            raise ToolError(f"scope must be 'me' or 'channel', not {quoted(scope, limit=20)}.")
        kept = await memories.remember(asking, fact, _SCOPES[scope], trace=trace)
        whose = "about the asker" if kept.scope == "person" else "for this channel"
        return f"Remembered {kept.id} ({whose}): {quoted(kept.text)}"

    @_stored
    async def forget(what: str) -> str:
        gone = await memories.forget(asking, what)
        return "Forgot " + "; ".join(_named(m, asking) for m in gone) + "."

    max_chars = memories.settings.max_chars
    return [
        FunctionTool(
            REMEMBER,
            remember,
            "Keeps a fact for later conversations, when the asker asks you to remember it "
            f"(at most {max_chars} characters). scope 'me' (default): about the asker, "
            "recalled only for them; 'channel': for everyone here (its admins only).",
            'remember[{"fact": "I manage the payments team", "scope": "me"}]',
            parameters={
                "type": "object",
                "properties": {
                    "fact": {"type": "string", "description": "The fact, in one sentence."},
                    "scope": {"type": "string", "enum": ["me", "channel"]},
                },
                "required": ["fact"],
                "additionalProperties": False,
            },
        ),
        FunctionTool(
            FORGET,
            forget,
            "Deletes one remembered fact the asker asks you to forget: give its id from the "
            "memories shown, or words of it.",
            "forget[m1a2b3c4d]",
            input_name="memory",
        ),
    ]
