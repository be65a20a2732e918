"""Earlier messages of a thread or channel, read when the bot is asked there, as fenced data.

::

    the surface's reader (adapters/slack/history.py, adapters/discord/history.py)
      -> Read: the messages it could read (oldest first), or why it could not (a refusal)
      -> bounded(...): at most ``context.messages`` of them and ``context.max_chars``
         characters, newest kept
      -> earlier(...): one line each, ``[time UTC] author: text``, and the summary the trace
         shows as its first step ("Read 14 earlier messages (Sam, Alex · 2,310 characters)")
      -> core.agent.Earlier: fenced by core.prompt before the question, never a system message

Only the platform knows how to fetch (and what to leave out: other bots, the bot's own
trace posts, the question itself); what is kept and how it is written is decided here, once.
A refusal (a missing scope or permission) is said once per place (``Refusals``) and the
question is answered without the messages.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from core.agent import Earlier

__all__ = [
    "ContextSettings",
    "Read",
    "Refusals",
    "Said",
    "bounded",
    "earlier",
]

AUTHOR_CHARS = 80
"""A display name as the model reads it (Discord allows 32, Slack 80)."""


@dataclass(frozen=True, slots=True)
class ContextSettings:
    """``context.messages`` and ``context.max_chars``; ``timeout`` bounds one read."""

    messages: int = 20
    max_chars: int = 8000
    timeout: float = 5.0

    @property
    def enabled(self) -> bool:
        return self.messages > 0 and self.max_chars > 0


@dataclass(frozen=True, slots=True)
class Said:
    """One earlier message, as the platform gave it."""

    author: str
    """The author's display name."""
    at: float
    """When it was sent (Unix seconds)."""
    text: str


@dataclass(frozen=True, slots=True)
class Read:
    """What a surface read: the messages, oldest first, or why it could not read them."""

    said: tuple[Said, ...] = ()
    refused: str | None = None
    """One sentence for the asker (the missing scope or permission), said once per place."""


EarlierReader = Callable[[], Awaitable[Read]]
"""A surface's reading of the asker's thread or channel (the question's own message left out)."""


def bounded(said: Sequence[Said], *, messages: int, max_chars: int) -> tuple[Said, ...]:
    """The newest ``messages`` of ``said`` whose lines fit ``max_chars`` together, oldest
    first. The newest message is kept even when it alone is too long (its text is cut);
    any older one that would not fit ends the reading."""
    kept: list[Said] = []
    total = 0
    for one in reversed(said[-messages:] if messages > 0 else ()):
        size = len(line(one)) + (1 if kept else 0)
        if total + size > max_chars:
            if not kept and max_chars > 0:
                kept.append(_cut(one, max_chars))
            break
        kept.append(one)
        total += size
    return tuple(reversed(kept))


def _cut(one: Said, max_chars: int) -> Said:
    """``one`` with its text cut so that its line fits ``max_chars``: the cut is made on the
    one-line form, which is what the line measures (a line break there becomes `` / ``)."""
    room = max(0, max_chars - len(line(Said(one.author, one.at, ""))) - 1)
    return Said(one.author, one.at, _one_line(one.text)[:room] + "…")


def line(one: Said) -> str:
    """``[2026-12-02 10:31 UTC] Sam: text``, the text's line breaks kept as `` / ``, so one
    line is one message and no message can pose as another's author."""
    stamp = time.strftime("%Y-%m-%d %H:%M", time.gmtime(max(0.0, one.at)))
    return f"[{stamp} UTC] {author(one.author)}: {_one_line(one.text)}"


def _one_line(text: str) -> str:
    return " / ".join(part.strip() for part in text.splitlines() if part.strip())


def author(name: str) -> str:
    """A display name on one line, bounded; never empty."""
    plain = " ".join(name.split())[:AUTHOR_CHARS]
    return plain or "someone"


def earlier(said: Sequence[Said]) -> Earlier | None:
    """What the model reads and what people see, or None when nothing was read."""
    if not said:
        return None
    text = "\n".join(line(one) for one in said)
    return Earlier(text=text, summary=summary(said, len(text)))


def summary(said: Sequence[Said], chars: int) -> str:
    """ "📖 Read 14 earlier messages (Sam, Alex, Priya · 2,310 characters)": the names as
    people wrote them, inert (no ``@``, ``<``, ``>`` or ``&`` to ping or mark up with)."""
    names: list[str] = []
    for one in said:
        name = "".join(c for c in author(one.author) if c not in "@<>&*_~`|")[:40].strip()
        if name and name not in names:
            names.append(name)
    shown = ", ".join(names[:5]) + (f" +{len(names) - 5}" if len(names) > 5 else "")
    count = "1 earlier message" if len(said) == 1 else f"{len(said)} earlier messages"
    return f"📖 Read {count} ({shown or 'someone'} · {chars:,} characters)"


class Refusals:
    """The places already told that their earlier messages cannot be read (this process,
    bounded): a missing permission is said once, not under every answer."""

    def __init__(self, *, remember: int = 10_000) -> None:
        self._told: OrderedDict[str, None] = OrderedDict()
        self._remember = remember

    def first(self, place: str) -> bool:
        """True the first time ``place`` is named (then it is remembered)."""
        if place in self._told:
            self._told.move_to_end(place)
            return False
        self._told[place] = None
        while len(self._told) > self._remember:
            self._told.popitem(last=False)
        return True
