"""The memory command on every surface (issue 43, item 5): one handler for Discord's
``/reactbot memory``, Slack's ``/ask-settings memory`` and Telegram's ``/memory``.

A surface translates its command into a ``Memory`` intent, calls ``memory_reply`` with its
own escaping and message size, and says the text privately. What is listed, forgotten or
cleared is what is recalled *here* (``Memories.recall_all``: the travel rule of
``core.memories``): a fact told in a DM is seen and deleted in that DM, never listed in a
channel, and on Slack another workspace's same user id sees nothing. The channel's
memories are listed, forgotten and cleared only by those who may write them (its admins,
or anyone with ``memory.channel_writers: anyone``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from adapters import words
from adapters.dispatch.intents import Memory as MemoryIntent
from adapters.dispatch.intents import MemoryAction, MemoryScope
from core.errors import StoreUnavailable
from core.memories import Asking, Holder, Memories, Memory, quoted

Escape = Callable[[str], str]


def asking_of(intent: MemoryIntent) -> Asking:
    actor = intent.actor
    return Asking(user=actor.id, name=actor.name, admin=actor.admin, where=intent.place)


async def memory_reply(
    intent: MemoryIntent, memories: Memories | None, *, escape: Escape, room: int
) -> str:
    """What to say, privately, to ``intent``'s actor: at most ``room`` characters, every
    memory's text passed through ``escape`` (the surface's: memories are hostile data)."""
    if memories is None:
        return words.MEMORY_OFF
    try:
        if intent.action == "forget":
            return await _forget(intent, memories, escape)
        if intent.action == "clear":
            return await _clear(intent, memories)
        return listing(await visible(intent, memories), escape=escape, room=room)
    except StoreUnavailable:
        return words.MEMORY_UNREADABLE


async def visible(intent: MemoryIntent, memories: Memories) -> list[Memory]:
    """The actor's memories recalled here, and the channel's for those who may change
    them; newest first."""
    here = asking_of(intent)
    admin = memories.may_write_channel(here)
    return [m for m in await memories.recall_all(here) if m.scope == "person" or admin]


async def _forget(intent: MemoryIntent, memories: Memories, escape: Escape) -> str:
    ident = intent.id.strip()
    chosen = [m for m in await visible(intent, memories) if m.id == ident]
    if not ident or not chosen:  # the id is the person's text: echoed escaped and short
        return words.memory_not_found(escape(quoted(ident, limit=20)))
    await memories.store.delete(chosen[0].holder, [ident])
    return words.memory_forgotten(ident)


async def _clear(intent: MemoryIntent, memories: Memories) -> str:
    count = await cleared(intent, memories)
    return words.MEMORY_ONLY_ADMINS if count is None else words.memory_cleared(count, intent.scope)


async def cleared(intent: MemoryIntent, memories: Memories) -> int | None:
    """Clear what ``intent.scope`` names: the actor's memories recalled here, or the
    channel's (None: the actor may not); how many were deleted."""
    here = asking_of(intent)
    if intent.scope == "channel":
        if not memories.may_write_channel(here):
            return None
        return await memories.store.clear(Holder.channel(here.where))
    mine = [m for m in await memories.recall_all(here) if m.scope == "person"]
    holder = Holder.person(here.where.platform, here.user)
    return len(await memories.store.delete(holder, [m.id for m in mine]))


def line(memory: Memory, escape: Escape) -> str:
    """``id · text · scope · date``, the text on one line and escaped."""
    day = time.strftime("%Y-%m-%d", time.gmtime(memory.at))
    text = escape(" ".join(memory.text.split()))
    return f"{memory.id} · {text} · {words.memory_scope(memory.scope)} · {day}"


def listing(found: Sequence[Memory], *, escape: Escape, room: int) -> str:
    """The newest that fit in ``room`` characters, then "… and K more"."""
    if not found:
        return words.MEMORY_NONE
    head = words.memory_header(len(found))
    shown: list[str] = []
    used = len(head)
    for index, memory in enumerate(found):
        text = line(memory, escape)
        more = len(words.memory_more(len(found) - index)) + 1 if index + 1 < len(found) else 0
        if used + 1 + len(text) + more > room:
            shown.append(words.memory_more(len(found) - index))
            break
        shown.append(text)
        used += 1 + len(text)
    return "\n".join([head, *shown])


def parse(text: str) -> tuple[MemoryAction, str, MemoryScope] | None:
    """A command's words after ``memory``: nothing or ``list``, ``forget ID``, ``clear``,
    ``clear channel``; None for anything else (say ``words.MEMORY_USAGE``)."""
    match text.split():
        case [] | ["list"]:
            return "list", "", "me"
        case ["forget", ident]:
            return "forget", ident, "me"
        case ["clear"] | ["clear", "me"]:
            return "clear", "", "me"
        case ["clear", "channel"]:
            return "clear", "", "channel"
    return None
