"""The ``schedule`` tool: a model proposes a scheduled question; the person who asked approves.

The tool needs approval on every call (``approval = True``) and never takes an "always"
(``remember = False``): each schedule is approved on its own. It acts for the run's asker in
the run's place, so a surface hands each run its own copy (``for_asker``, as the lookup tool
gets the conversation's files); a copy bound to nobody refuses. Inside a scheduled run
(``core.scheduler.SCHEDULED``) it refuses too: a schedule can never make more schedules.
The checks and limits are ``ScheduleBook.add``'s, the same as the commands'.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from core.scheduler import SCHEDULED
from core.schedules import Added, Place, Refused, Schedule, ScheduleBook
from core.tools.base import ToolHints
from core.when import MAX_WHEN_CHARS

IN_SCHEDULED_RUN = "Refused: a scheduled run cannot create schedules."
NOBODY = "Refused: schedules can only be added for a person in a chat."
WHEN_HELP = (
    'when: a cron expression and a time zone ("0 9 * * MON Europe/Paris") or "every day 09:00 '
    'Europe/Paris", "every monday 09:00 Europe/Paris", "every 2 hours", "in 30 minutes", '
    '"at 2026-12-24 18:00 Europe/Paris"'
)


@dataclass(frozen=True, slots=True)
class Asker:
    owner: str
    owner_name: str
    place: Place
    admin: bool


class ScheduleTool:
    name = "schedule"
    example = 'schedule[{"when": "every monday 09:00 Europe/Paris", "question": "What changed?"}]'
    input_name = "input"
    approval = True
    remember = False
    hints = ToolHints(read_only=False, destructive=False, open_world=False)

    def __init__(
        self,
        book: ScheduleBook,
        *,
        say_added: Callable[[Schedule, Sequence[int]], str],
        say_refused: Callable[[Refused], str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._book = book
        self._say_added = say_added
        self._say_refused = say_refused
        self._clock = clock
        self._asker: Asker | None = None
        self.description = (
            "Schedules a question the bot will ask on its own, here, at the times given "
            f"(the person who asked must approve it). {WHEN_HELP}; question: what to ask."
        )
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                "when": {"type": "string", "maxLength": MAX_WHEN_CHARS},
                "question": {"type": "string", "maxLength": book.settings.max_question_chars},
            },
            "required": ["when", "question"],
            "additionalProperties": False,
        }

    def for_asker(self, *, owner: str, owner_name: str, place: Place, admin: bool) -> ScheduleTool:
        """This tool for one run, acting for its asker in its place."""
        bound = copy.copy(self)
        bound._asker = Asker(owner, owner_name, place, admin)
        return bound

    async def run(self, arg: str) -> str:
        if SCHEDULED.get() is not None:
            return IN_SCHEDULED_RUN
        if self._asker is None:
            return NOBODY
        try:
            arguments = json.loads(arg)
            when, question = str(arguments["when"]), str(arguments["question"])
        except (ValueError, KeyError, TypeError):
            return 'Refused: give {"when": ..., "question": ...}. ' + WHEN_HELP + "."
        asker = self._asker
        added = await self._book.add(
            owner=asker.owner,
            owner_name=asker.owner_name,
            place=asker.place,
            when_text=when,
            question=question,
            admin=asker.admin,
            now=self._clock(),
        )
        if isinstance(added, Added):
            return self._say_added(added.schedule, added.upcoming)
        return "Refused: " + self._say_refused(added)
