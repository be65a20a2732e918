"""Scheduled questions posted by the bot itself, on every surface (issue 44): the one
``core.scheduler.Runner`` and ``Notice`` of a serving process.

::

    Scheduler (core) --occurrence--> ScheduledRuns.run
      -> the port of the schedule's platform (``SchedulePort``: only what the surface
         alone knows: its record of the owner at the place, a Reply that posts a new
         message there, and a plain message in the place)
      -> answering.admit(ask)   the owner is the asker: their budgets (never exempt, even
                                an admin's: nobody watches the run), their run slot, the
                                place's access rule; no cooldown (they did not just ask)
      -> answering.answer       the normal run: the live message (its first line the
                                header, ``words.schedule_header``), the trace in its thread,
                                tokens and cost counted to the owner, crash recovery
      -> the outcome: ok; ``post_failed`` when its message could not be posted;
         ``run_failed`` when it was refused or its run failed (the Refusal is said in the
         place, after the header)

A surface never decides any of this: its port only posts. The owner's name in the header is
stored as the surface rendered it when the schedule was added, in a form that does not ping
(``Schedule.owner_name``), and every renderer escapes it again.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from adapters import words
from adapters.dispatch.checks import Admitted
from adapters.dispatch.handlers.ask import Answering, Follower, Reply
from adapters.dispatch.intents import Actor, Where
from adapters.dispatch.outcome import Refusal
from adapters.dispatch.schedule import ScheduleDesk
from adapters.live import RunView, Verbosity
from core.agent import Run
from core.scheduler import Occurrence
from core.schedules import Outcome, Schedule

log = logging.getLogger(__name__)

A = TypeVar("A")

ANSWERED = frozenset({"answered", "refused", "best_effort", "cancelled"})
"""Trace statuses that count as a run that went through (a person's Stop included: the
schedule did not fail)."""


class SchedulePort(Protocol[A]):
    """A surface's half of a scheduled run."""

    @property
    def answering(self) -> Answering[A]: ...

    @property
    def ready(self) -> bool:
        """Connected and able to post now (a schedule waits while it is not)."""
        ...

    def asker(self, schedule: Schedule) -> tuple[A, str]:
        """The surface's record of the owner at the schedule's place (for its reply), and
        where that place's settings and budget are kept."""
        ...

    def where(self, schedule: Schedule) -> Where:
        """The schedule's place as the access rule reads it (``adapters.dispatch.access``):
        its runs are asked there by its owner."""
        ...

    def reply(self, schedule: Schedule, ask: Admitted[A], header: str) -> Reply:
        """The Reply that posts the run's message as a new message in the place."""
        ...

    async def say(self, schedule: Schedule, text: str) -> None:
        """A short message of the bot's own words in the schedule's place; never raises."""
        ...


def owner_id(schedule: Schedule) -> str:
    """The owner's id on the platform: the last part of their key (``slack:T1:U1`` ->
    ``U1``; ``operator`` for the operator's)."""
    return schedule.owner.rsplit(":", 1)[-1]


class ScheduledRuns:
    """The Runner and Notice of every surface this process serves."""

    def __init__(self) -> None:
        self.ports: dict[str, SchedulePort[Any]] = {}

    def add(self, platform: str, port: SchedulePort[Any]) -> None:
        self.ports[platform] = port

    def serves(self, schedule: Schedule) -> bool:
        """Whether this process runs ``schedule`` now: its platform is served here, ready."""
        port = self.ports.get(schedule.place.platform)
        return port is not None and port.ready

    async def run(self, occurrence: Occurrence) -> Outcome:
        schedule = occurrence.schedule
        port = self.ports.get(schedule.place.platform)
        if port is None:  # the scheduler asks ``serves`` first: a platform gone meanwhile
            return "post_failed"
        header = words.schedule_header(schedule, late=occurrence.late)
        return await self._run(port, occurrence, header)

    async def _run(self, port: SchedulePort[A], occurrence: Occurrence, header: str) -> Outcome:
        schedule = occurrence.schedule
        who, place = port.asker(schedule)
        answering = port.answering
        owner = Actor(
            schedule.place.platform, owner_id(schedule), schedule.owner, schedule.owner_name
        )
        ask = Admitted(
            who=who,
            actor=owner,
            at=port.where(schedule),
            place=place,
            question=schedule.question,
            ident=occurrence.id,
            scheduled=True,
        )
        ticket = await answering.admit(ask)
        if isinstance(ticket, Refusal):
            log.info("schedules: %s refused (%s)", occurrence.id, ticket.reason)
            await port.say(schedule, f"{header}\n{ticket.text}")
            return "run_failed"
        watched = Watched(port.reply(schedule, ask, header), header)
        ended: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()

        async def answer() -> None:
            outcome: Outcome = "run_failed"
            try:
                await answering.answer(ticket, watched)
                outcome = watched.outcome
            finally:
                if not ended.done():
                    ended.set_result(outcome)

        # A task of the surface's, as its other answers: its shutdown lets it end visibly.
        answering.spawn(answer())
        return await asyncio.shield(ended)

    async def paused(self, schedule: Schedule) -> None:
        port = self.ports.get(schedule.place.platform)
        if port is not None:
            await port.say(schedule, words.schedule_paused_notice(schedule))


@dataclass(frozen=True, slots=True)
class Joining:
    """What a surface joins while ``serve`` runs schedules: the runner its port is added
    to, and the commands' handler."""

    runs: ScheduledRuns
    desk: ScheduleDesk


class Watched:
    """A surface's Reply, with the header put on the run's view and the outcome kept."""

    def __init__(self, reply: Reply, header: str) -> None:
        self._reply = reply
        self._header = header
        self._posted = False
        self._run: Run | None = None

    @property
    def outcome(self) -> Outcome:
        if not self._posted:
            return "post_failed"
        status = self._run.trace.status if self._run is not None else "failed"
        return "ok" if status in ANSWERED else "run_failed"

    async def open(self, verbosity: Verbosity) -> str | None:
        return await self._reply.open(verbosity)

    def reading(self) -> AbstractAsyncContextManager[object]:
        return self._reply.reading()

    async def show(self, run: Run, view: RunView) -> Follower | None:
        view.header = self._header
        shown = await self._reply.show(run, view)
        if shown is None:
            return None
        self._posted = True
        return shown

    async def note(self, text: str) -> None:
        await self._reply.note(text)

    async def ended(self, run: Run) -> None:
        self._run = run
        await self._reply.ended(run)

    def where(self) -> dict[str, str]:
        return self._reply.where()
