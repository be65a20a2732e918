"""The checks an intent passes before its handler, each written once for every surface.

A check looks at one ``Admission`` (the intent, possibly merged, and the surface's policy)
and says "go on" (None), ``Drop`` (nothing to say) or ``Refusal``. Here: ``Claim`` (each
event once, whichever process receives it, however often the platform delivers it),
``Burst`` (``agent.merge_window``), ``RetryOnce``, and a question's admission chain
(``AdmissionChain``), one check per concern, cheapest first, each "go on" or a Refusal::

    closing, access (``adapters.dispatch.access``), question bounds, model, daily budgets (what
    is left after the holds of the questions still running, and this one's hold taken in
    the same step: ``core.budgets``), cooldown (admins exempt), voice notes heard, room in
    this process (``adapters.room``: the runs going on every surface, the event loop on
    time), runs per person
      -> a Refusal (its text is shown by the surface) or a Ticket (the room it holds,
         given back exactly once: when the answer ends, ``handlers.ask``, or at once)
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from adapters.channels import ChannelChoices, ChoiceError
from adapters.context import EarlierReader
from adapters.dispatch import intents
from adapters.dispatch.access import Access, Members, Names
from adapters.dispatch.bursts import Bursts
from adapters.dispatch.conversation import burst_key
from adapters.dispatch.intents import Actor, Ask, Intent
from adapters.dispatch.outcome import Drop, Reason, Refusal
from adapters.policy import Policy
from adapters.room import BUSY, Room
from adapters.voice import Hearing
from adapters.words import RESTARTING, busy_message, cooldown_message, too_long
from core.agent import Agent
from core.budgets import Hold, TokenBudgets
from core.files import Incoming
from core.memories import Where
from core.schedules import Place
from core.speech import Heard
from core.stores import EventClaims, Stores

log = logging.getLogger(__name__)

IntentT = TypeVar("IntentT", bound=Intent)
W = TypeVar("W")
A = TypeVar("A")
"""The surface's own record of who asks (Discord: roles and places; Slack: the question),
carried along for its reply."""


@dataclass(slots=True)
class Admission(Generic[IntentT]):
    """One intent going through its checks (a check may replace it: a burst's merge)."""

    intent: IntentT
    policy: Policy


class Claim:
    """Each event once: a redelivery (Telegram's retry of a webhook, a browser's repeated
    POST, a second shard) is dropped without a word."""

    def __init__(self, claims: EventClaims) -> None:
        self.claims = claims

    async def __call__(self, admission: Admission[IntentT]) -> Drop | None:
        fresh = await self.claims.claim(admission.intent.event)
        return None if fresh else Drop("duplicate")


class Burst(Generic[W]):
    """``agent.merge_window``: a message from one person in one conversation within the
    window of their last is added to that one's question (the first waits the window out).
    Asks that do not gather (slash commands, Retry: their ack cannot wait) pass at once."""

    def __init__(self, policy: Policy) -> None:
        self.bursts: Bursts[Ask[W]] = Bursts(policy.merge_window)

    async def __call__(self, admission: Admission[Ask[W]]) -> Drop | None:
        ask = admission.intent
        if not ask.gathers:
            return None
        merged = await self.bursts.gather(ask, burst_key(ask.actor, ask.where, admission.policy))
        if merged is None:
            return Drop("merged")
        admission.intent = merged
        return None


RETRY_CLAIM_TTL = 7 * 24 * 3600
"""How long a Retry stays used: as long as an interrupted run's trace is kept (7 days)."""


class RetryOnce:
    """Retry asks an interrupted run's question again once, however many people press it,
    on whichever process: the first press claims the run (``retry:{run_id}``); a press that
    is then refused (busy, cooldown, budget) gives the claim back, so Retry may be pressed
    again; an admitted one never can."""

    def __init__(self, claims: EventClaims) -> None:
        self.claims = claims

    async def take(self, run_id: str) -> bool:
        return await self.claims.claim(f"retry:{run_id}", ttl=RETRY_CLAIM_TTL)

    async def give_back(self, run_id: str) -> None:
        await self.claims.release(f"retry:{run_id}")


@dataclass(frozen=True, slots=True)
class Admitted(Generic[A]):
    """One question as the admission chain reads it (``Dispatcher.admitted`` builds it from
    an ``Ask`` intent)."""

    who: A
    """The surface's own record of the asker, for its reply."""
    actor: Actor
    """Who asks: the access rule reads it; budgets, cooldowns and run slots count under its
    ``key``."""
    at: intents.Where
    """Where it is asked, as the access rule reads it (``adapters.dispatch.access``)."""
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
    scheduled: bool = False
    """Asked by a schedule on its owner's behalf (``adapters.scheduled``): no cooldown."""
    schedule: Place | None = None
    """Where a schedule this question's run proposes would post (``adapters.dispatch.
    schedule.place_of``); None: the ``schedule`` tool is not offered to the run."""

    @property
    def user(self) -> str:
        """The asker's id on the platform (the view and the buttons name it)."""
        return self.actor.id

    @property
    def key(self) -> str:
        """The asker across processes (``discord:1``, ``slack:T:U``)."""
        return self.actor.key

    @property
    def name(self) -> str:
        """The asker as the trace shows them (a display name when the platform gave one)."""
        return self.actor.name

    @property
    def admin(self) -> bool:
        return self.actor.admin


@dataclass(slots=True)
class Ticket(Generic[A]):
    """An admitted ask and the room it holds (a place in this process, a run slot), given
    back exactly once: by ``Answering.answer`` when the answer ends, or ``give_back``."""

    ask: Admitted[A]
    _owner: AdmissionChain[A] = field(repr=False)
    _held: bool = True

    async def give_back(self) -> None:
        if self._held:
            self._held = False
            await self._owner._release(self.ask)


class AdmissionChain(Generic[A]):
    """A question's admission on one surface, over shared stores: the chain of checks, and
    the room an admitted one holds until its ``Ticket`` is given back."""

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
        hearing: Hearing,
        room: Room | None = None,
        members: Members | None = None,
        names: Names | None = None,
    ) -> None:
        self.agent = agent
        self.hearing = hearing
        """Voice notes heard at admission, the intake's (``stt.*``; ``adapters.voice``)."""
        self.platform = surface.lower()
        self.room = room if room is not None else Room()
        """The process's room, shared by every surface it serves (``adapters.room``); one of
        its own, without the lag check, when none is given."""
        self.policy = policy
        self.cooldowns = stores.cooldowns
        self.slots = stores.slots
        self.budgets = budgets
        self.choices = choices
        self.decisions: Counter[Reason | Literal["admitted"]] = Counter()
        """How many asks were admitted, and refused by each check, since start."""
        self.closing = False
        self.access = Access(policy, members, names=names)
        """Who may ask where (``adapters.dispatch.access``): the surface's ``members`` lookup
        for a DM to a restricted bot, its ``names`` for the places a refusal names."""
        self._empty_question = empty_question
        self._quote = quote
        self._holds: dict[str, Hold] = {}
        """What each admitted ask holds of its budgets, by ``Admitted.ident``, until it is
        counted or given back."""
        self.checks: tuple[Callable[[Admitted[A]], Awaitable[Refusal | None]], ...] = (
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

    async def admit(self, ask: Admitted[A]) -> Ticket[A] | Refusal:
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

    async def refusal(self, actor: Actor, where: intents.Where) -> str | None:
        """The access rule alone, for commands that start no run (``/model``, ``/memory``)."""
        return await self.access.refusal(actor, where)

    async def _open(self, ask: Admitted[A]) -> Refusal | None:
        return Refusal("closing", RESTARTING) if self.closing else None

    async def _allowed(self, ask: Admitted[A]) -> Refusal | None:
        text = await self.access.refusal(ask.actor, ask.at)
        return Refusal("access", text) if text is not None else None

    async def _bounded(self, ask: Admitted[A]) -> Refusal | None:
        if not ask.question and not self.hearing.wanted(ask.files):
            return Refusal("question", self._empty_question)
        problem = self.agent.question_problem(ask.question)
        return Refusal("question", too_long(problem)) if problem is not None else None

    async def _known_model(self, ask: Admitted[A]) -> Refusal | None:
        if ask.model is None:
            return None
        try:
            self.choices.model(ask.model)
        except ChoiceError as exc:  # it quotes the asker's text: made inert for the surface
            return Refusal("model", self._quote(str(exc)))
        return None

    async def _within_budget(self, ask: Admitted[A]) -> Refusal | None:
        """What is left after the questions still running, checked and this question's
        estimate held in one step of the shared store (``TokenBudgets.hold``)."""
        held = await self.budgets.hold(
            ask.key, ask.place, run=ask.ident, lease=self.policy.lease, exempt=ask.admin
        )
        if isinstance(held, str):
            return Refusal("budget", held)
        self._holds[ask.ident] = held
        return None

    async def _unhold(self, ask: Admitted[A]) -> None:
        held = self._holds.pop(ask.ident, None)
        if held is not None:
            await self.budgets.release(held)

    async def _cooled_down(self, ask: Admitted[A]) -> Refusal | None:
        """Shared by every process, so N replicas still allow one question per window."""
        if ask.admin or ask.scheduled:
            return None
        left = await self.cooldowns.hit(ask.key, self.policy.cooldown_seconds)
        return Refusal("cooldown", cooldown_message(left)) if left > 0 else None

    async def _heard(self, ask: Admitted[A]) -> Refusal | None:
        """Its voice notes transcribed, once the cheaper checks passed (nothing is sent for
        a question refused anyway)."""
        refused = await self.hearing.check(ask)
        return Refusal("voice", refused) if refused is not None else None

    async def _room_here(self, ask: Admitted[A]) -> Refusal | None:
        """The process's room (its runs on every surface, its loop on time): checked and
        reserved with no await between, so a burst cannot overshoot it."""
        full = self.room.take()
        return Refusal(full, BUSY) if full is not None else None

    async def _slot_for_person(self, ask: Admitted[A]) -> Refusal | None:
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

    async def _take_slot(self, ask: Admitted[A]) -> bool:
        p = self.policy
        return await self.slots.take(ask.key, ask.ident, limit=p.max_runs_per_user, lease=p.lease)

    async def _release(self, ask: Admitted[A]) -> None:
        self.room.give_back()
        await self._unhold(ask)  # its question never ran (a run's hold is settled by count)
        try:
            await self.slots.give_back(ask.key, ask.ident)
        except Exception:  # its lease frees it anyway
            log.exception("could not give back the run slot of %s", ask.ident)
