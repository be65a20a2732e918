"""A question's life once admitted, written once for every surface (plan decision 1: the
run's life of what was ``adapters.answering``).

::

    an admitted ask (``checks.AdmissionChain.admit``: a Ticket, the room it holds)
      -> Answering.answer(ticket, reply): the channel's choices, files, start, follow,
         renew the run slot and the budget hold, count tokens (settling the hold),
         release; the run is registered meanwhile (``adapters.recovery``), so a Stop from
         any process and a shutdown find it

A surface brings its ``Access`` (the shared rule of who may ask where, with the surface's
lookup of memberships: ``adapters.dispatch.access``), its ``Policy``
(``adapters.policy``: the same fields on every surface, built from the config once), and
for each question a ``Reply``: the few steps only it knows (post or stream the message,
say a short note, tidy up). Everything else is here and in ``checks``, so each policy is
one policy on every surface: admins pass the cooldown, the process's room holds, every task
is guarded and logged; who may stop a run or decide on an action is checked against the
run's own record (``owner``) by the presses' handlers (``handlers.stop``, ``.decide``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass
from typing import Any, Generic, Protocol

from adapters.attachments import ConversationFiles
from adapters.channels import ChannelChoices
from adapters.context import Read, Refusals, bounded, earlier
from adapters.decisions import Owner
from adapters.dispatch.access import Members, Names
from adapters.dispatch.checks import A, AdmissionChain, Admitted, Ticket
from adapters.live import LiveStats, RunView, Verbosity
from adapters.policy import Policy
from adapters.recovery import BEAT_EVERY, Finalise, Recovery
from adapters.room import Room
from adapters.tasks import Tasks
from adapters.voice import Hearing
from adapters.words import SHUTDOWN, heard_line
from core.agent import Agent, Earlier, Prepare, Run
from core.approval import ApprovalBroker
from core.budgets import TokenBudgets
from core.events import Event
from core.files import Intake
from core.memories import Asking
from core.schedule_tool import ScheduleTool
from core.stores import Stores, renewing
from core.tools import ToolRegistry

log = logging.getLogger(__name__)


class Follower(Protocol):
    """What drives the message from the run's events to its final state and its trace
    thread (``LiveMessage``, whether its surface replaces or appends)."""

    @property
    def stats(self) -> LiveStats: ...

    async def follow(self, events: AsyncIterator[Event]) -> object: ...


class Reply(Protocol):
    """The surface's half of one answer: only what it alone knows how to do."""

    async def open(self, verbosity: Verbosity) -> str | None:
        """Make room before the run starts (Slack posts its root or starts its stream here);
        the conversation the run belongs to, or None when it cannot be answered (the asker
        was told why)."""
        ...

    def reading(self) -> AbstractAsyncContextManager[object]:
        """Held while the question's files are read (Discord shows "typing…")."""
        ...

    async def show(self, run: Run, view: RunView) -> Follower | None:
        """The message the run is followed into (posted now if not yet); None when it could
        not be posted (logged; the run is closed)."""
        ...

    async def note(self, text: str) -> None:
        """One short extra message near the answer (the refused files); never raises."""
        ...

    async def ended(self, run: Run) -> None:
        """The run ended, however (views stopped, a thread status cleared); never raises."""
        ...

    def where(self) -> dict[str, str]:
        """The platform's reference to the message (after ``show``), for a live process to
        finish it if this one dies mid-answer (``Finalise``)."""
        ...


@dataclass(frozen=True, slots=True)
class Running(Generic[A]):
    run: Run
    ask: Admitted[A]
    where: dict[str, str]
    """The platform's reference to the run's message (``Reply.where``)."""


class Answering(AdmissionChain[A]):
    """Admission (``AdmissionChain``), the run's life and release for one surface, over
    shared stores."""

    def __init__(
        self,
        agent: Agent,
        *,
        surface: str,
        policy: Policy,
        stores: Stores,
        budgets: TokenBudgets,
        choices: ChannelChoices,
        empty_question: str,
        quote: Callable[[str], str],
        files: ConversationFiles | None = None,
        broker: ApprovalBroker | None = None,
        shutdown_by: str = SHUTDOWN,
        finalise: Finalise | None = None,
        room: Room | None = None,
        members: Members | None = None,
        names: Names | None = None,
    ) -> None:
        super().__init__(
            agent,
            surface=surface,
            policy=policy,
            stores=stores,
            budgets=budgets,
            choices=choices,
            empty_question=empty_question,
            quote=quote,
            hearing=files.hearing if files is not None else Hearing(),
            room=room,
            members=members,
            names=names,
        )
        self.context = policy.context
        """How much of a channel's earlier messages a question may read (``context.*``)."""
        self._context_refusals = Refusals()
        self.stops = stores.stops
        self.files = files
        self.broker = broker
        """The agent's approver, started here (it is the application's to close)."""
        self.stats: deque[LiveStats] = deque(maxlen=10_000)
        """The followers' counters of finished runs (benchmarks and diagnostics)."""
        self.tasks = Tasks(surface)
        self.recovery = Recovery(
            stores,
            surface=surface,
            finalise=finalise,
            budgets=budgets,
            beat_every=min(BEAT_EVERY, policy.lease / 5),
            orphan_after=policy.lease,
        )
        """The heartbeat of the answers written here; the finishing of a dead process's."""
        self.shutdown_by = shutdown_by
        """``Run.cancel(by=…)`` at shutdown, as the surface's renderer words it."""
        self._running: dict[str, Running[A]] = {}
        self._listening = AsyncExitStack()
        self._started = False

    # ---- the run's life -----------------------------------------------------------------
    async def answer(self, ticket: Ticket[A], reply: Reply) -> None:
        """Answer an admitted ask through ``reply``, renewing its run slot meanwhile, and give
        its room back however it ends."""
        p = self.policy
        try:
            async with renewing(
                lambda: self._renew(ticket.ask),
                every=p.lease / 3,
                until=p.hold_at_most - p.lease,
                what=f"run slot {ticket.ask.ident}",
            ):
                await self._answer(ticket.ask, reply)
        finally:
            await ticket.give_back()

    async def _renew(self, ask: Admitted[A]) -> None:
        """The run slot and the budget hold outlive their lease while the run lives."""
        held = self._holds.get(ask.ident)
        if held is not None:
            await self.budgets.renew(held, lease=self.policy.lease)
        await self._take_slot(ask)

    async def _answer(self, ask: Admitted[A], reply: Reply) -> None:
        choice = await self.choices.for_run(ask.place, model=ask.model)  # one read of them
        verbosity = choice.verbosity or self.policy.verbosity
        conversation = await reply.open(verbosity)
        if conversation is None:
            return
        read = await self._read_earlier(ask, reply)
        intake, tools = Intake(), choice.tools
        prepare: Prepare | None = None
        files = self.files
        shown = asyncio.Event()
        if files is not None and ask.files:
            # Read in the run's own task, its live message (with Stop) shown meanwhile: a
            # Stop or a shutdown ends the reading at once, as it ends any step.
            async def prepare(
                say: Callable[[str], None],
            ) -> tuple[ToolRegistry | None, Sequence[str]]:
                async with reply.reading():  # one file of the asker's at a time (the workers')
                    intake, tools = await files.prepare(
                        conversation, ask.files, choice, self.agent.tools, owner=ask.key, say=say
                    )
                tools = proposing(self.agent.tools if tools is None else tools, ask)
                if notice := intake.notice():
                    # After the live message: a note first could take its place (a Discord
                    # interaction's follow-up sent while its response is still deferred).
                    await shown.wait()
                    await reply.note(notice)
                return tools, intake.shown

        elif files is not None:  # no file now: the earlier ones searched (one store read)
            intake, tools = await files.prepare(conversation, (), choice, self.agent.tools)
        tools = proposing(self.agent.tools if tools is None else tools, ask)
        run = self.agent.start(
            ask.question,
            conversation=conversation,
            user=ask.name,
            user_id=ask.user,
            channel=ask.channel_name,
            model=choice.model,
            tools=tools,
            persona=choice.persona,
            images=intake.shown,
            earlier=read,
            prepare=prepare,
            asking=Asking(ask.user, ask.name, ask.admin, ask.where)
            if ask.where is not None and choice.memory
            else None,
            voice=ask.heard,
        )
        view = RunView(
            question=run.trace.question,
            heard=heard_line(ask.heard.text, ask.heard.seconds) if ask.heard else "",
            asker=ask.user,
            approvers=self.policy.approvers,
            verbosity=verbosity,
        )
        try:
            follower = await reply.show(run, view)
        finally:
            shown.set()
        if follower is None:
            await run.aclose()
            return
        await self._follow(ask, run, reply, follower, notice=intake.notice())

    # ---- earlier messages ---------------------------------------------------------------
    async def _read_earlier(self, ask: Admitted[A], reply: Reply) -> Earlier | None:
        """The asker's thread or channel, read within ``context.timeout`` and bounded; a
        refusal is said once per place in a note, and the question is answered anyway."""
        settings = self.context
        if ask.earlier is None or not settings.enabled:
            return None
        try:
            async with asyncio.timeout(settings.timeout):
                got: Read = await ask.earlier()
        except Exception:  # a read that failed costs the context, never the answer
            log.warning("could not read the earlier messages for %s", ask.ident, exc_info=True)
            return None
        if got.refused is not None and self._context_refusals.first(ask.place):
            await reply.note(got.refused)
        kept = bounded(got.said, messages=settings.messages, max_chars=settings.max_chars)
        return earlier(kept)

    async def _follow(
        self, ask: Admitted[A], run: Run, reply: Reply, follower: Follower, *, notice: str | None
    ) -> None:
        # Registered the moment its message (and Stop) is shown, before anything else is
        # awaited: a Stop pressed here or at another process finds it.
        where = reply.where()
        self._running[run.trace.id] = Running(run, ask, where)
        try:
            await self.recovery.track(
                run,
                conversation=run.trace.conversation,
                where=where,
                asker=ask.user,
                asker_key=ask.key,
                slot=ask.ident,
                place=ask.place,
                held=self._holds.get(ask.ident),
            )
            if notice:
                await reply.note(notice)
            if self.closing:  # shutdown began while the message was being posted
                run.cancel(by=self.shutdown_by)
            await follower.follow(self.recovery.watched(run.trace.id, run.events()))
        finally:
            await self.recovery.untrack(run.trace.id)
            self._running.pop(run.trace.id, None)
            self.stats.append(follower.stats)
            if not run.done:  # only when this task itself was cancelled mid-run (shutdown)
                await run.aclose()
            held = self._holds.pop(ask.ident, None)
            await self.budgets.count(ask.key, ask.place, run.trace, hold=held)
            await reply.ended(run)

    # ---- runs in flight -----------------------------------------------------------------
    @property
    def running(self) -> tuple[str, ...]:
        """The ids of the runs this process is answering now (stopped ones leave at once)."""
        return tuple(self._running)

    def ask_of(self, run_id: str) -> Admitted[A] | None:
        """Who asked the run ``run_id``, when this process runs it."""
        running = self._running.get(run_id)
        return running.ask if running is not None else None

    async def owner(self, run_id: str) -> Owner | None:
        """The run's own word on who asked it and where its message is: its ask here, else
        the record its process keeps in the shared registry; None when no process runs it."""
        running = self._running.get(run_id)
        if running is not None:
            return Owner(running.ask.user, running.where)
        record = await self.recovery.registry.record(self.recovery.surface, run_id)
        return Owner(record.asker, record.where) if record is not None else None

    async def stop(self, run_id: str, *, by: str, by_id: str = "") -> bool:
        """Stop ``run_id`` here, or ask the process running it, unchecked (a press is checked
        first: ``adapters.dispatch.handlers.stop``); False when no process runs it any more."""
        running = self._running.get(run_id)
        if running is not None:
            running.run.cancel(by=by, by_id=by_id or None)
            return True
        if not await self.recovery.running(run_id):
            return False
        await self.stops.request(run_id, by=by, by_id=by_id)
        return True

    def _stop_requested(self, run_id: str, by: str, by_id: str) -> None:
        running = self._running.get(run_id)
        if running is not None:
            running.run.cancel(by=by, by_id=by_id or None)

    # ---- tasks and the process's life ---------------------------------------------------
    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` in a task this pipeline owns; a failure is logged, the others go on."""
        self.tasks.spawn(work)

    async def settled(self) -> None:
        """Return once every task spawned so far (answers, their threads) is done."""
        await self.tasks.settled()

    async def start(self) -> None:
        """Hear stop requests (and decisions) from other processes; once, before serving.
        The broker is the application's, shared by every platform this process serves: it
        is started here (a no-op once started) and closed by whoever made it."""
        if not self._started:
            self._started = True
            self.room.start()
            await self._listening.enter_async_context(self.stops.subscribe(self._stop_requested))
            if self.broker is not None:
                await self.broker.start()
            self.recovery.start()

    async def aclose(self, *, grace: float) -> None:
        """Refuse new asks, stop every run (its message ends in a visible "stopped" state),
        and wait up to ``grace`` seconds for the answers' tasks before cutting them off."""
        self.closing = True
        for running in list(self._running.values()):
            running.run.cancel(by=self.shutdown_by)
        if self.tasks:
            _, pending = await asyncio.wait(self.tasks.pending(), timeout=grace)
            for task in pending:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*pending, return_exceptions=True)
        await self.recovery.aclose()
        await self._listening.aclose()


def proposing(tools: ToolRegistry, ask: Admitted[A]) -> ToolRegistry:
    """``tools`` for this ask's run: the ``schedule`` tool (``core.schedule_tool``, in the
    registry while ``serve`` runs schedules) bound to its asker and place, or left out where
    no schedule can be posted, and in a scheduled run (which may never make schedules)."""
    found = next((t for t in tools if isinstance(t, ScheduleTool)), None)
    if found is None:
        return tools
    bound = ToolRegistry()
    for tool in tools:
        if tool is not found:
            bound.add(tool)
    if ask.schedule is not None and not ask.scheduled:
        bound.add(
            found.for_asker(owner=ask.key, owner_name=ask.name, place=ask.schedule, admin=ask.admin)
        )
    return bound
