"""The answering pipeline: a question's life once its surface has read it, written once.

::

    platform event --(the surface translates)--> Ask
      -> Answering.admit(ask): one check per concern, cheapest first, each "go on" or a Refusal
           closing, access (the surface's own rule), question bounds, model, daily budgets
           (what is left after the holds of the questions still running, and this one's
           hold taken in the same step: ``core.budgets``), cooldown (admins exempt), room in this process (``adapters.room``: the runs going
           on every surface, the event loop on time), runs per person
         -> a Refusal (its text is shown by the surface) or a Ticket (the room it holds)
      -> Answering.answer(ticket, reply): the channel's choices, files, start, follow,
         renew the run slot and the budget hold, count tokens (settling the hold), release; the run is registered meanwhile, so a
         Stop from any process and a shutdown find it

A surface brings its ``Access`` rule (who may ask where, in its own terms), its ``Policy``
(``adapters.policy``: the same fields on every surface, built from the config once), and for each
question a ``Reply``: the few steps only it knows (post or stream the message, say a short
note, tidy up). Everything else is here, so each policy is one policy on every surface:
admins pass the cooldown, the process's room holds, every task is guarded and logged, and
one rule says who may stop a run or decide on an action (``adapters.decisions``), checked
against the run's own record wherever it runs (``owner``; the presses themselves are the
dispatcher's: ``adapters.dispatch.handlers``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections import Counter, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

from adapters.attachments import ConversationFiles
from adapters.channels import ChannelChoices, ChoiceError
from adapters.context import EarlierReader, Read, Refusals, bounded, earlier
from adapters.decisions import Owner
from adapters.dispatch.outcome import Reason
from adapters.dispatch.outcome import (
    Refusal as Refusal,  # the surfaces' name for it, until they dispatch
)
from adapters.live import LiveStats, RunView, Verbosity
from adapters.policy import Policy
from adapters.recovery import BEAT_EVERY, Finalise, Recovery
from adapters.room import BUSY, Room
from adapters.tasks import Tasks
from adapters.voice import Hearing
from adapters.words import heard_line
from core.agent import Agent, Earlier, Prepare, Run
from core.approval import ApprovalBroker
from core.budgets import Hold, TokenBudgets
from core.events import Event
from core.files import Incoming, Intake
from core.memories import Asking, Where
from core.speech import Heard
from core.storage import Stores
from core.stores import renewing
from core.tools import ToolRegistry

log = logging.getLogger(__name__)

A = TypeVar("A")
"""The surface's own record of who asks (Discord: roles and places; Slack: the question)."""

RESTARTING = "reactbot is restarting; ask again in a moment."
SHUTDOWN = "reactbot:shutdown"
"""``Run.cancel(by=SHUTDOWN)``: stopped because the bot is shutting down."""


def too_long(problem: str) -> str:
    return f"⚠️ {problem} Please shorten it and ask again."


def cooldown_message(seconds_left: float) -> str:
    return f"⏳ One moment: you can ask again in {math.ceil(seconds_left)} s."


def busy_message(limit: int) -> str:
    runs = "a question" if limit == 1 else f"{limit} questions"
    return f"⏳ You already have {runs} running; ask again when one has finished."


def edit_problem(text: str, *, json_input: bool) -> str | None:
    """Why an edited input cannot be used (empty; not a JSON object where the tool takes
    one), in words for the person; None when it can."""
    if not text.strip():
        return "The new input is empty."
    if not json_input:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        return f"That is not a JSON object ({str(exc).split(':')[0]})."
    return None if isinstance(value, dict) else "That is not a JSON object (not an object)."


@dataclass(frozen=True, slots=True)
class Ask(Generic[A]):
    """One question, as a surface read it from its event."""

    who: A
    """The surface's own record of the asker, for its ``Access`` rule."""
    user: str
    """The asker's id on the platform (the view and the buttons name it)."""
    key: str
    """The asker across processes (``discord:1``, ``slack:T:U``): budgets, cooldowns and run
    slots count under it."""
    name: str
    """The asker as the trace shows them (a display name when the platform gave one)."""
    admin: bool
    place: str
    """Where the channel's settings are kept; the channel whose budget the question spends."""
    question: str
    ident: str
    """This ask, unique (the event's claim key): its run slot's id."""
    model: str | None = None
    """A catalogue model for this question only (``/ask model:``)."""
    files: Sequence[Incoming] = ()
    earlier: EarlierReader | None = field(default=None, compare=False)
    """Reads the thread's or channel's earlier messages (a mention where others talked);
    None: the question is read alone."""
    channel_name: str = ""
    """The place as people call it (``#general``), when the platform gave its name."""
    where: Where | None = None
    """Where it is asked, as memories read it (``core.memories``); None: no memories."""
    heard: Heard | None = None
    """Its voice note, heard at admission (``adapters.voice``): the transcript is in
    ``question``."""


Access = Callable[[A], Awaitable[str | None]]
"""A surface's rule of who may ask where: None, or the refusal in the surface's words."""


@dataclass(slots=True)
class Ticket(Generic[A]):
    """An admitted ask and the room it holds (a place in this process, a run slot), given
    back exactly once: by ``Answering.answer`` when the answer ends, or ``give_back``."""

    ask: Ask[A]
    _owner: Answering[A] = field(repr=False)
    _held: bool = True

    async def give_back(self) -> None:
        if self._held:
            self._held = False
            await self._owner._release(self.ask)


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
    ask: Ask[A]
    where: dict[str, str]
    """The platform's reference to the run's message (``Reply.where``)."""


class Answering(Generic[A]):
    """Admission, the run's life and release for one surface, over shared stores."""

    def __init__(
        self,
        agent: Agent,
        *,
        surface: str,
        access: Access[A],
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
    ) -> None:
        self.agent = agent
        self.hearing = files.hearing if files is not None else Hearing()
        """Voice notes heard at admission, the intake's (``stt.*``; ``adapters.voice``)."""
        self.platform = surface.lower()
        self.room = room if room is not None else Room()
        """The process's room, shared by every surface it serves (``adapters.room``); one of
        its own, without the lag check, when none is given."""
        self.context = policy.context
        """How much of a channel's earlier messages a question may read (``context.*``)."""
        self._context_refusals = Refusals()
        self.policy = policy
        self.cooldowns = stores.cooldowns
        self.slots = stores.slots
        self.stops = stores.stops
        self.budgets = budgets
        self.choices = choices
        self.files = files
        self.broker = broker
        """The agent's approver, started here (it is the application's to close)."""
        self.stats: deque[LiveStats] = deque(maxlen=10_000)
        """The followers' counters of finished runs (benchmarks and diagnostics)."""
        self.decisions: Counter[Reason | Literal["admitted"]] = Counter()
        """How many asks were admitted, and refused by each check, since start."""
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
        self.closing = False
        self.shutdown_by = shutdown_by
        """``Run.cancel(by=…)`` at shutdown, as the surface's renderer words it."""
        self._access = access
        self._empty_question = empty_question
        self._quote = quote
        self._running: dict[str, Running[A]] = {}
        self._holds: dict[str, Hold] = {}
        """What each admitted ask holds of its budgets, by ``Ask.ident``, until it is counted
        or given back."""
        self._listening = AsyncExitStack()
        self._started = False
        self.checks: tuple[Callable[[Ask[A]], Awaitable[Refusal | None]], ...] = (
            self._open,
            self._allowed,
            self._bounded,
            self._known_model,
            self._within_budget,
            self._cooled_down,
            self._heard,
            self._room_here,
            self._slot_for_person,
        )
        """The admission chain, in order; the last two take room that ``Ticket`` holds."""

    # ---- admission ----------------------------------------------------------------------
    async def admit(self, ask: Ask[A]) -> Ticket[A] | Refusal:
        """The first refusal of the chain, or a ticket the caller must hand to ``answer``
        (or ``give_back`` if it cannot)."""
        try:
            for check in self.checks:
                refused = await check(ask)
                if refused is not None:
                    self.hearing.forget(ask.ident)
                    await self._unhold(ask)  # held by the budget check, refused after it
                    self.decisions[refused.reason] += 1
                    self.room.refused[self.platform, refused.reason] += 1
                    return refused
        except BaseException:
            self.hearing.forget(ask.ident)
            await asyncio.shield(self._unhold(ask))
            raise
        self.decisions["admitted"] += 1
        return Ticket(self.hearing.apply(ask), self)

    async def refusal(self, who: A) -> str | None:
        """The access rule alone, for commands that start no run (``/reset``, ``/trace``)."""
        return await self._access(who)

    async def _open(self, ask: Ask[A]) -> Refusal | None:
        return Refusal("closing", RESTARTING) if self.closing else None

    async def _allowed(self, ask: Ask[A]) -> Refusal | None:
        text = await self._access(ask.who)
        return Refusal("access", text) if text is not None else None

    async def _bounded(self, ask: Ask[A]) -> Refusal | None:
        if not ask.question and not self.hearing.wanted(ask.files):
            return Refusal("question", self._empty_question)
        problem = self.agent.question_problem(ask.question)
        return Refusal("question", too_long(problem)) if problem is not None else None

    async def _known_model(self, ask: Ask[A]) -> Refusal | None:
        if ask.model is None:
            return None
        try:
            self.choices.model(ask.model)
        except ChoiceError as exc:  # it quotes the asker's text: made inert for the surface
            return Refusal("model", self._quote(str(exc)))
        return None

    async def _within_budget(self, ask: Ask[A]) -> Refusal | None:
        """What is left after the questions still running, checked and this question's
        estimate held in one step of the shared store (``TokenBudgets.hold``)."""
        held = await self.budgets.hold(
            ask.key, ask.place, run=ask.ident, lease=self.policy.lease, exempt=ask.admin
        )
        if isinstance(held, str):
            return Refusal("budget", held)
        self._holds[ask.ident] = held
        return None

    async def _unhold(self, ask: Ask[A]) -> None:
        held = self._holds.pop(ask.ident, None)
        if held is not None:
            await self.budgets.release(held)

    async def _cooled_down(self, ask: Ask[A]) -> Refusal | None:
        """Shared by every process, so N replicas still allow one question per window."""
        if ask.admin:
            return None
        left = await self.cooldowns.hit(ask.key, self.policy.cooldown_seconds)
        return Refusal("cooldown", cooldown_message(left)) if left > 0 else None

    async def _heard(self, ask: Ask[A]) -> Refusal | None:
        """Its voice notes transcribed, once the cheaper checks passed (nothing is sent for
        a question refused anyway)."""
        refused = await self.hearing.check(ask)
        return Refusal("voice", refused) if refused is not None else None

    async def _room_here(self, ask: Ask[A]) -> Refusal | None:
        """The process's room (its runs on every surface, its loop on time): checked and
        reserved with no await between, so a burst cannot overshoot it."""
        full = self.room.take()
        return Refusal(full, BUSY) if full is not None else None

    async def _slot_for_person(self, ask: Ask[A]) -> Refusal | None:
        """The asker's own slot, shared by every process; the place here is given back when
        it is refused (or the store fails)."""
        try:
            taken = await self._take_slot(ask)
        except BaseException:
            self.room.give_back()
            raise
        if not taken:
            self.room.give_back()
            return Refusal("busy", busy_message(self.policy.max_runs_per_user))
        return None

    async def _take_slot(self, ask: Ask[A]) -> bool:
        p = self.policy
        return await self.slots.take(ask.key, ask.ident, limit=p.max_runs_per_user, lease=p.lease)

    async def _release(self, ask: Ask[A]) -> None:
        self.room.give_back()
        await self._unhold(ask)  # its question never ran (a run's hold is settled by count)
        try:
            await self.slots.give_back(ask.key, ask.ident)
        except Exception:  # its lease frees it anyway
            log.exception("could not give back the run slot of %s", ask.ident)

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

    async def _renew(self, ask: Ask[A]) -> None:
        """The run slot and the budget hold outlive their lease while the run lives."""
        held = self._holds.get(ask.ident)
        if held is not None:
            await self.budgets.renew(held, lease=self.policy.lease)
        await self._take_slot(ask)

    async def _answer(self, ask: Ask[A], reply: Reply) -> None:
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
                if notice := intake.notice():
                    # After the live message: a note first could take its place (a Discord
                    # interaction's follow-up sent while its response is still deferred).
                    await shown.wait()
                    await reply.note(notice)
                return tools, intake.shown

        elif files is not None:  # no file now: the earlier ones searched (one store read)
            intake, tools = await files.prepare(conversation, (), choice, self.agent.tools)
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
    async def _read_earlier(self, ask: Ask[A], reply: Reply) -> Earlier | None:
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
        self, ask: Ask[A], run: Run, reply: Reply, follower: Follower, *, notice: str | None
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

    def ask_of(self, run_id: str) -> Ask[A] | None:
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
