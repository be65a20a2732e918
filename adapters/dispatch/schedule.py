"""The schedule command on every surface (issue 44, item 2): one handler for Discord's
``/reactbot schedule``, Slack's ``/ask-settings schedule`` and Telegram's ``/schedule``.

A surface translates its command into a ``Schedule`` intent (``parse`` reads the words of
Slack's and Telegram's; Discord's come as options), calls ``ScheduleDesk.reply`` with its
own escaping and message size, and says the text. The rules are ``core.schedules``' (who
may add: ``schedule.who``; the limits; the shortest interval), checked by
``ScheduleBook.add`` as for the operator's command and the ``schedule`` tool; here only
what a chat adds to them:

- a place sees and changes only its own schedules (an id from elsewhere is "not here");
- pause, resume, delete and run are for the schedule's owner and the place's admins.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from adapters import words
from adapters.dispatch.intents import Intent, Where
from core.errors import StoreUnavailable
from core.schedules import Added, Place, ScheduleBook
from core.schedules import Schedule as Kept

Escape = Callable[[str], str]
ScheduleAction = Literal["add", "list", "pause", "resume", "delete", "run"]
CHANGES: dict[str, Literal["paused", "resumed", "deleted", "run"]] = {
    "pause": "paused",
    "resume": "resumed",
    "delete": "deleted",
    "run": "run",
}
QUOTES = {'"': '"', "“": "”", "„": "“", "«": "»", "'": "'"}
"""Opening quote -> closing quote around ``<when>`` (phones and Slack type curly ones)."""
MAX_ID_CHARS = 40


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule(Intent):
    """``schedule add "<when>" <question>``, ``list``, ``pause|resume|delete|run ID``."""

    place: Place
    """Where it is asked: the schedules it lists and changes, and where one added runs."""
    shown_as: str
    """The actor as a scheduled run's header will name them, in a form that never pings
    (the surface's: a plain name, escaped again when shown)."""
    action: ScheduleAction = "list"
    id: str = ""
    when: str = ""
    question: str = ""


@dataclass(frozen=True, slots=True)
class Parsed:
    action: ScheduleAction
    id: str = ""
    when: str = ""
    question: str = ""


def parse(text: str) -> Parsed | None:
    """A command's words after ``schedule``; None for anything else (say
    ``words.SCHEDULE_USAGE``)."""
    head, _, rest = text.strip().partition(" ")
    rest = rest.strip()
    if head in ("", "list") and not rest:
        return Parsed("list")
    if head in CHANGES:
        return Parsed(head, id=rest) if rest and len(rest.split()) == 1 else None  # type: ignore[arg-type]
    if head != "add":
        return None
    quoted = _quoted(rest)
    if quoted is None:
        return None
    when, question = quoted
    return Parsed("add", when=when, question=question) if when and question else None


def _quoted(text: str) -> tuple[str, str] | None:
    """``"every day 09:00 UTC" What changed?`` -> (the quoted part, the rest), stripped."""
    close = QUOTES.get(text[:1])
    if close is None:
        return None
    end = text.find(close, 1)
    if end < 0:
        return None
    return text[1:end].strip(), text[end + 1 :].strip()


class ScheduleDesk:
    """The commands' handler over the process's schedules."""

    def __init__(self, book: ScheduleBook, *, clock: Callable[[], float] = time.time) -> None:
        self.book = book
        self.clock = clock

    async def reply(self, intent: Schedule, *, escape: Escape, room: int) -> str:
        """What to say to ``intent``'s actor: at most ``room`` characters, every text of a
        person's (questions, ids, ``when``) passed through ``escape``."""
        try:
            if intent.action == "add":
                return escape(await self._add(intent))
            if intent.action == "list":
                return listing(await self.book.listing(intent.place), escape=escape, room=room)
            return escape(await self._change(intent))
        except StoreUnavailable:
            return words.SCHEDULES_UNREADABLE

    async def _add(self, intent: Schedule) -> str:
        actor = intent.actor
        added = await self.book.add(
            owner=actor.key,
            owner_name=intent.shown_as,
            place=intent.place,
            when_text=intent.when,
            question=intent.question,
            admin=actor.admin,
            now=self.clock(),
        )
        if isinstance(added, Added):
            return words.schedule_added(added.schedule, added.upcoming)
        return words.schedule_refused(added)

    async def _change(self, intent: Schedule) -> str:
        ident = intent.id.strip()[:MAX_ID_CHARS]
        held = await self.book.store.get(ident) if ident else None
        if held is None or held.place.key != intent.place.key:
            return words.schedule_missing(ident)
        if not (intent.actor.admin or held.owner == intent.actor.key):
            return words.SCHEDULE_NOT_YOURS
        changed = await self._apply(intent.action, ident)
        if changed is None:  # deleted meanwhile
            return words.schedule_missing(ident)
        return words.schedule_changed(changed, CHANGES[intent.action])

    async def _apply(self, action: ScheduleAction, ident: str) -> Kept | None:
        book, now = self.book, self.clock()
        if action == "pause":
            return await book.pause(ident)
        if action == "resume":
            return await book.resume(ident, now=now)
        if action == "delete":
            return await book.delete(ident)
        return await book.run_now(ident, now=now)


def listing(found: Sequence[Kept], *, escape: Escape, room: int) -> str:
    """The place's schedules, oldest first, as many as fit in ``room``, then "… and K
    more"."""
    if not found:
        return words.SCHEDULES_NONE
    head = words.schedules_header(len(found))
    shown: list[str] = []
    used = len(head)
    for index, schedule in enumerate(found):
        line = escape(words.schedule_line(schedule))
        left = len(found) - index
        more = len(words.schedules_more(left)) + 1 if index + 1 < len(found) else 0
        if used + 1 + len(line) + more > room:
            shown.append(words.schedules_more(left))
            break
        shown.append(line)
        used += 1 + len(line)
    return "\n".join([head, *shown])


POSTING_PLATFORMS = frozenset({"slack", "discord", "telegram"})
"""Where a scheduled run can be posted (each has a port in ``adapters.<platform>.scheduled``)."""


def place_of(where: Where) -> Place | None:
    """Where a schedule proposed by a question asked at ``where`` would post (the ``schedule``
    tool's place): that channel, chat or topic, in its thread when the question was in one
    of its own; a Discord thread the bot opened on an answer is its channel's conversation,
    so its channel. None where no scheduled run can be posted (the web chat, the terminal)."""
    if where.platform not in POSTING_PLATFORMS:
        return None
    thread = "" if where.kind == "bot_thread" else where.thread or ""
    return Place(where.platform, where.channel, thread, where.space or "")
