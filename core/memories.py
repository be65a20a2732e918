"""What people asked the bot to remember across conversations (issue 43), and where it may
be recalled. Not ``core.memory``, which compacts one conversation's history.

A memory belongs to one holder: a person (per platform user) or a channel (per place: a
Slack or Discord channel, a Telegram chat or topic, a web session). It is written and
deleted only through the ``remember`` and ``forget`` tools (``core.tools.memory``), which
run as the asker, and recalled before each run as fenced data (``core.prompt``), under
one rule of travel, ``recallable``:

=====================  =========================================================
told                   recalled
=====================  =========================================================
person, in a DM        only in that person's DMs with the bot (same platform, same
                       Slack workspace: its user ids are its own)
person, in a channel   for that person, in the channels of the same workspace /
                       server / group (never in a DM, never for anyone else)
person, in a closed    there only, for that person (a Discord private thread or a
place                  channel @everyone cannot view; a Slack private channel, group DM
                       or channel shared with another organisation)
channel                in that channel only, for whoever asks there
=====================  =========================================================

``MemoryStore`` is a small protocol: ``InMemoryMemories`` here (one process, gone at a
restart), ``core.stores.redis.memories.RedisMemories`` on Redis (no TTL: kept on purpose until
forgotten). Every read goes to the store, so a deletion holds on the next run of every
process. A holder at its limit refuses a new memory and names its oldest: nothing is ever
dropped silently.
"""

from __future__ import annotations

import builtins
import json
import re
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from core.errors import ToolError

Scope = Literal["person", "channel"]
ChannelWriters = Literal["admins", "anyone"]

MAX_CHARS = 500
MAX_PER_USER = 100
MAX_PER_CHANNEL = 200
RECALL_CHARS = 1500
MAX_TIME = 32503680000.0
"""The year 3000: a stored date past it (or before 1970) is refused as unreadable."""


@dataclass(frozen=True, slots=True)
class Where:
    """A place as the travel rule reads it."""

    platform: str
    """``slack``, ``discord``, ``telegram``, ``web``."""
    space: str
    """The workspace, server (guild) or group the place belongs to ("" for none: a DM)."""
    place: str
    """The channel (a Telegram chat or topic, a web session): the holder of its memories."""
    private: bool
    """A DM or private chat with the bot: only the person and the bot are there."""
    closed: bool = False
    """A place only some of the space see (a Discord private thread or hidden channel, a
    Slack private channel or group DM: the surface reads it from the platform): a person's
    fact told there is recalled there only, never in the space's open channels."""


@dataclass(frozen=True, slots=True)
class Asking:
    """Who asks a run and where: the run writes, deletes and recalls memories as them."""

    user: str
    """Their id on the platform."""
    name: str
    admin: bool
    """An admin of the place (may write the channel's memories)."""
    where: Where


@dataclass(frozen=True, slots=True)
class Holder:
    """Whose memories: a person's (``person``, platform, user id) or a channel's."""

    scope: Scope
    platform: str
    id: str

    @property
    def key(self) -> str:
        return f"{self.scope}:{self.platform}:{self.id}"

    @classmethod
    def person(cls, platform: str, user: str) -> Holder:
        return cls("person", platform, user)

    @classmethod
    def channel(cls, where: Where) -> Holder:
        return cls("channel", where.platform, where.place)


@dataclass(frozen=True, slots=True)
class Memory:
    id: str
    text: str
    scope: Scope
    by: str
    """Who told it (their platform id)."""
    where: Where
    at: float
    """When it was told (Unix seconds)."""
    trace: str = ""
    """The run whose ``remember`` kept it."""
    by_name: str = ""

    @property
    def holder(self) -> Holder:
        if self.scope == "person":
            return Holder.person(self.where.platform, self.by)
        return Holder.channel(self.where)

    def to_json(self) -> str:
        w = self.where
        return json.dumps(
            {
                "id": self.id,
                "text": self.text,
                "scope": self.scope,
                "by": self.by,
                "by_name": self.by_name,
                "where": [w.platform, w.space, w.place, w.private, w.closed],
                "at": self.at,
                "trace": self.trace,
            },
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Memory | None:
        """The memory, or None for a value this version cannot read."""
        try:
            data = json.loads(text)
            platform, space, place, private, *rest = data["where"]
            closed = rest == [True]  # absent before places could be closed
            scope, at = data["scope"], float(data["at"])
            if scope not in ("person", "channel") or not 0 <= at < MAX_TIME:
                return None  # a date no line can show (NaN, the year 5000) is no memory
            return cls(
                id=str(data["id"]),
                text=str(data["text"]),
                scope=scope,
                by=str(data["by"]),
                by_name=str(data.get("by_name", "")),
                where=Where(str(platform), str(space), str(place), private is True, closed),
                at=at,
                trace=str(data.get("trace", "")),
            )
        except (ValueError, KeyError, TypeError):
            return None


def new_id() -> str:
    """Short enough to type in ``forget``, random enough never to collide in one holder."""
    return "m" + secrets.token_hex(4)


class MemoryStore(Protocol):
    async def add(self, memory: Memory, *, limit: int) -> Memory | None:
        """Keep ``memory`` unless its holder has ``limit`` memories already, checked and
        written in one step: None when kept, else the holder's oldest (to name it)."""
        ...

    async def list(self, *holders: Holder) -> list[Memory]:
        """The holders' memories, newest first, read together (a run recalls the asker's
        and the channel's: one round trip, not two)."""
        ...

    async def delete(self, holder: Holder, ids: Sequence[str]) -> builtins.list[str]:
        """Delete the holder's memories ``ids``; the ids that were there."""
        ...

    async def clear(self, holder: Holder) -> int:
        """Delete every memory of the holder; how many there were."""
        ...


def newest_first(memories: Iterable[Memory]) -> list[Memory]:
    return sorted(memories, key=lambda m: (m.at, m.id), reverse=True)


class InMemoryMemories:
    """Memories in this process: gone at a restart (the bot says so at start)."""

    def __init__(self) -> None:
        self._held: dict[Holder, dict[str, Memory]] = {}

    async def add(self, memory: Memory, *, limit: int) -> Memory | None:
        kept = self._held.setdefault(memory.holder, {})
        if len(kept) >= limit:
            return newest_first(kept.values())[-1] if kept else memory
        kept[memory.id] = memory
        return None

    async def list(self, *holders: Holder) -> list[Memory]:
        return newest_first(m for h in holders for m in self._held.get(h, {}).values())

    async def delete(self, holder: Holder, ids: Sequence[str]) -> builtins.list[str]:
        kept = self._held.get(holder, {})
        gone = [i for i in dict.fromkeys(ids) if kept.pop(i, None) is not None]
        if not kept:
            self._held.pop(holder, None)
        return gone

    async def clear(self, holder: Holder) -> int:
        return len(self._held.pop(holder, {}))


# ---- the rule of travel -------------------------------------------------------------------


def recallable(memory: Memory, here: Asking) -> bool:
    """Whether ``memory`` may reach a run asked by ``here``: never somewhere more public
    than where it was told, never to another person (see the module's table)."""
    told, now = memory.where, here.where
    if told.platform != now.platform:
        return False
    if memory.scope == "channel":
        return told.place == now.place
    if memory.by != here.user:
        return False
    if told.closed and told.place != now.place:
        return False  # a closed place's fact stays there
    # A DM's space is its workspace on Slack (whose user ids are the workspace's own: another
    # workspace's U1 can be someone else), "" where the platform has none.
    return told.private == now.private and told.space == now.space


# ---- the service the tools and the run use --------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemorySettings:
    """``memory.*`` in the config."""

    enabled: bool = True
    max_chars: int = MAX_CHARS
    max_per_user: int = MAX_PER_USER
    max_per_channel: int = MAX_PER_CHANNEL
    recall_chars: int = RECALL_CHARS
    channel_writers: ChannelWriters = "admins"


class MemoryRefused(ToolError):
    """A ``remember`` or ``forget`` that cannot be done; the message says why, to the model
    (a ``ToolError``: it becomes the tool's Observation)."""


@dataclass(slots=True)
class Memories:
    """The store under the settings: what a run recalls, and what its tools change."""

    store: MemoryStore
    settings: MemorySettings = field(default_factory=MemorySettings)
    clock: Callable[[], float] = time.time

    async def recall(self, here: Asking) -> list[Memory]:
        """The asker's and the channel's memories this place may see, newest first, as many
        as fit in ``recall_chars`` (counted as the lines the model reads). Read from the store
        every time: a memory forgotten on any process is gone from the next run."""
        found = [m for m in await self.store.list(*self._holders(here)) if recallable(m, here)]
        given, room = [], self.settings.recall_chars
        for memory in found:
            size = len(memory_line(memory)) + 1
            if size <= room:  # one too long for the room never hides the older ones
                given.append(memory)
                room -= size
        return given

    async def remember(self, here: Asking, text: str, scope: Scope, *, trace: str = "") -> Memory:
        text = plain_fact(text)
        limit = self.settings.max_chars
        if not text:
            raise MemoryRefused("Nothing to remember: the fact is empty.")
        if len(text) > limit:
            raise MemoryRefused(
                f"That is {len(text):,} characters; a memory holds at most {limit:,}. "
                "Remember a shorter fact."
            )
        if scope == "channel" and not self.may_write_channel(here):
            raise MemoryRefused(
                "Only this channel's admins can keep memories for the whole channel; "
                "remember it for the asker (scope: me) instead."
            )
        memory = Memory(
            new_id(), text, scope, here.user, here.where, self.clock(), trace, here.name
        )
        most = self.settings.max_per_user if scope == "person" else self.settings.max_per_channel
        oldest = await self.store.add(memory, limit=most)
        if oldest is not None:
            whose = "The asker has" if scope == "person" else "This channel has"
            named = (  # never quoted where it may not be read (a DM's fact in a channel)
                f"the oldest is {oldest.id} ({quoted(oldest.text)})"
                if recallable(oldest, here) and shown_here(oldest, here)
                else f"the oldest, {oldest.id}, was told elsewhere (a DM or another "
                "place): they can forget it there"
            )
            raise MemoryRefused(
                f"{whose} {most} memories, the most kept; nothing was saved. "
                f"Ask them to forget one first: {named}."
            )
        return memory

    def may_write_channel(self, here: Asking) -> bool:
        """The channel's admins (anyone in a DM, which is theirs), or anyone when
        ``memory.channel_writers`` says so."""
        return self.settings.channel_writers == "anyone" or here.admin or here.where.private

    async def forget(self, here: Asking, what: str) -> list[Memory]:
        """Delete the memories ``what`` names (an id, or words of the fact) among those the
        asker may delete: their own, and the channel's when they may write it. Raises
        ``MemoryRefused`` when none or too many match."""
        what = " ".join(what.split())
        if not what:
            raise MemoryRefused("Say which memory to forget: its id or words of it.")
        candidates = [m for m in await self.recall_all(here) if self._may_delete(m, here)]
        chosen = matching(candidates, what)
        if not chosen:
            raise MemoryRefused(f"No memory of the asker's here matches {quoted(what)}.")
        if len(chosen) > 1 and not any(m.id == what for m in chosen):
            ids = ", ".join(m.id for m in chosen[:10])
            raise MemoryRefused(f"{len(chosen)} memories match; forget one by its id: {ids}.")
        for holder in {m.holder for m in chosen}:
            await self.store.delete(holder, [m.id for m in chosen if m.holder == holder])
        return chosen

    async def recall_all(self, here: Asking) -> list[Memory]:
        """Every memory this place may see, unbounded (``forget`` searches them)."""
        return [m for m in await self.store.list(*self._holders(here)) if recallable(m, here)]

    @staticmethod
    def _holders(here: Asking) -> tuple[Holder, Holder]:
        """Whose memories a run here may recall: the asker's and the place's."""
        return Holder.person(here.where.platform, here.user), Holder.channel(here.where)

    def _may_delete(self, memory: Memory, here: Asking) -> bool:
        if memory.scope == "person":
            return memory.by == here.user
        return self.may_write_channel(here)


_HIDDEN = re.compile(
    "[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891"
    "\u08e2\u180e\u200b\u200e-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff"
    "\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)
"""Every control (but whitespace), format character (bidi, zero-width, tags; ZWJ and ZWNJ
excepted) and surrogate of Unicode 15: ``tests/unit/test_memory_hostile.py`` checks it
against ``unicodedata``."""


def plain_fact(text: str) -> str:
    """``text`` as a memory keeps it: on one line, without the characters a listing does
    not show but a model reads (controls, bidi overrides, zero-width and tag characters,
    which can hide a whole sentence) or that no store can encode (lone surrogates, which a
    model's JSON may hold). At C speed: a huge input is refused in milliseconds."""
    return " ".join(_HIDDEN.sub("", text).split())


def matching(memories: Sequence[Memory], what: str) -> list[Memory]:
    """The memory whose id is ``what``, else those whose text holds every word of it
    (case-insensitively)."""
    exact = [m for m in memories if m.id == what.strip()]
    if exact:
        return exact
    words = what.casefold().split()
    return [m for m in memories if all(w in m.text.casefold() for w in words)]


def quoted(text: str, *, limit: int = 80) -> str:
    """A fact quoted inside a sentence: on one line, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return f"“{flat if len(flat) <= limit else flat[: limit - 1] + '…'}”"


def memory_line(memory: Memory) -> str:
    """One memory as the model reads it: ``id · text · scope · date``."""
    scope = "about the asker" if memory.scope == "person" else "about this channel"
    day = time.strftime("%Y-%m-%d", time.gmtime(memory.at))
    return f"{memory.id} · {' '.join(memory.text.split())} · {scope} · {day}"


def memory_lines(memories: Sequence[Memory]) -> str:
    return "\n".join(memory_line(m) for m in memories)


HIDDEN_HERE = "(the asker's, told elsewhere: its text is shown only to them)"


def shown_here(memory: Memory, here: Asking) -> bool:
    """Whether everyone who reads this place's traces may read ``memory``'s text: in a
    private place (only the asker reads it), a channel's own memory, a person's fact told
    in this very place (its ``remember`` is in this place's traces already). A person's
    fact told elsewhere is recalled for them here, but read by them alone: a trace thread
    in a channel is read by everyone there."""
    told, now = memory.where, here.where
    return now.private or memory.scope == "channel" or told.place == now.place


def trace_line(memory: Memory, here: Asking) -> str:
    """One recalled memory as this place's trace shows it: whole where it may be read there
    (``shown_here``), else its id, scope and date only."""
    if shown_here(memory, here):
        return memory_line(memory)
    day = time.strftime("%Y-%m-%d", time.gmtime(memory.at))
    return f"{memory.id} · {HIDDEN_HERE} · about the asker · {day}"
