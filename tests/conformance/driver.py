"""What every platform's conformance driver does, in a person's terms (issue 41, slice 2).

A driver wraps one surface's existing integration harness (the real SDK against the strict
fake in ``tests/fakes``) and speaks for three people: the ``asker``, an ``admin`` and some
``other`` person in the same place. What a person was told comes back as ``Said``: the
text normalised (``normalise``) so that the same sentence from ``adapters.words`` compares
equal whatever markup the surface wrapped it in.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from core.scripted import ScriptedModel
from core.trace import Trace

Persona = Literal["asker", "admin", "other"]
Spot = Literal["channel", "thread"]
"""Where: the shared place, or its thread that the bot answered in (Discord's thread the
bot opened, Slack's answer thread, a Telegram forum topic)."""
Said = str
"""What one person saw (an ephemeral, a callback answer, a reply, an HTTP error), normalised."""


@dataclass
class AskHandle:
    """One question as asked: ``ref`` is the surface's own (a message, a root index, a run)."""

    who: Persona
    text: str
    ref: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


class Driver(Protocol):
    platform: str
    model: ScriptedModel
    """The scripted model every run of this surface calls (its ``calls`` count the runs)."""

    async def ask(self, who: Persona, text: str, *, where: Spot = "channel") -> AskHandle: ...

    async def redeliver(self, handle: AskHandle) -> Said:
        """The platform delivers the event of ``handle`` again (a retry, a replay); what
        the person was told of the repeat ("" if nothing)."""

    async def running(self, handle: AskHandle) -> None:
        """Until the answer to ``handle`` is live, with its Stop."""

    async def refusal(self, handle: AskHandle) -> Said:
        """What the asker of ``handle`` was told instead of an answer."""

    async def press_stop(self, who: Persona, handle: AskHandle) -> Said:
        """``who`` presses Stop under the running answer; what they were told ("" if nothing)."""

    async def decide(self, who: Persona, handle: AskHandle, verdict: str) -> Said:
        """``who`` approves or denies (``verdict``) the action the run waits on; a denial
        gives the reason "not now" where the surface asks for one."""

    def ran(self) -> list[object]:
        """What the action that needs approval ran with, in order."""

    async def orphan(self, question: str) -> AskHandle:
        """What a process killed (kill -9) mid-answer leaves: its live message with Stop,
        and its run's record in the shared registry, its heartbeat stopped long ago. This
        surface's sweep (``run_lease`` 1 s here) is the next process that finds it."""

    async def orphan_finished(self, handle: AskHandle) -> str:
        """The orphan's message once the sweep finished it (a Retry under it)."""

    async def press_retry(self, who: Persona, handle: AskHandle) -> Said:
        """``who`` presses Retry under the finished orphan; what they were told."""

    async def vote(self, who: Persona, handle: AskHandle, value: str) -> Said:
        """``who`` votes ``value`` ("up" or "down") on the finished answer (its button)."""

    async def settings(self, who: Persona, name: str, value: str) -> Said:
        """``who`` changes the place's setting ``name`` to ``value``."""

    async def usage(self, who: Persona) -> Said:
        """``who`` asks what they have used today."""

    async def reset(self, who: Persona, *, where: Spot = "channel") -> Said: ...

    async def trace(self, who: Persona) -> Said:
        """The last trace of the place, as shown (files' text included)."""

    async def final_text(self, handle: AskHandle) -> str:
        """The answer's message once final, normalised."""

    async def history(self, conversation: str | None = None) -> list[dict[str, Any]]:
        """A conversation's stored history (None: the place's, where ``asker`` asks)."""

    async def settled(self) -> None:
        """Every run the surface started has ended."""

    async def traces(self) -> list[Trace]:
        """The traces this surface's runs stored, newest first."""

    def named(self, who: Persona) -> str | None:
        """How the surface names ``who`` in a refusal (a mention, normalised), or None
        when it says "the person who asked"."""


_MENTION = re.compile(r"<@!?([A-Za-z0-9]+)(?:\|([^>]*))?>")
_TAGS = re.compile(r"</?[a-zA-Z][^>]*>")
_EMPHASIS = re.compile(r"(\*\*|__|\*|_|~~|`)(?=\S)(.+?)(?<=\S)\1")


def normalise(text: str, names: dict[str, str] | None = None) -> Said:
    """``text`` as a person reads it: mentions ``<@U1>`` as ``@name`` (``names`` maps ids
    to names; else ``@id``), HTML tags and entities, bold, italics, code and strikes
    dropped, Slack's ``:emoji:`` codes for the two the surfaces use mapped back, and
    whitespace collapsed."""
    known = names or {}
    text = _MENTION.sub(lambda m: "@" + (m.group(2) or known.get(m.group(1), m.group(1))), text)
    text = html.unescape(_TAGS.sub("", text))
    previous = None
    while previous != text:
        previous, text = text, _EMPHASIS.sub(r"\2", text)
    text = text.replace(":warning:", "⚠️").replace(":broom:", "🧹")
    return " ".join(text.split())
