"""One way in for every surface's questions: ``Dispatcher.dispatch(ask, reply)``.

::

    platform event --(the surface translates)--> Ask intent (actor, where, event id)
      -> Claim: each event once, however often it is delivered (else Drop, said nothing)
      -> Burst: a message within ``agent.merge_window`` of the same person's last, in the
         same conversation (``conversation.burst_key``), joins that one (else Drop)
      -> the admission chain (``checks.AdmissionChain``: bounds, model, budgets,
         cooldown, room, slot)
      -> ``admitted``: the surface's ack (Discord's defer, Slack's "working"), once every
         check passed; a refusal or a redelivery gets none
      -> the run's life (``handlers.ask.Answering``) in a task this dispatcher owns
      -> Outcome: Refusal (the surface shows its words), Drop, or Done

    Slash commands (``/ask``) and Retry come this way too, with ``gathers=False`` (their
    ack cannot wait out a burst): Retry (``retry``) is its press claimed once, the run
    taken once (``handlers.retry``), then its question through ``dispatch``.

    Stop / Decide (a press on a run's button) -> the press claimed once (a redelivery:
      Drop) -> the run's own record, wherever it runs (``handlers.stop``,
      ``handlers.decide``) -> Refusal, or Done with the ack's words

The surface keeps only what is its platform's: translating the event, its ack rule, and the
``Reply`` the answer is drawn through.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from typing import Any, Generic, TypeVar

from adapters.dispatch import schedule
from adapters.dispatch.checks import Admission, Admitted, Burst, Claim, RetryOnce, Ticket
from adapters.dispatch.conversation import conversation_of, settings_place
from adapters.dispatch.handlers import decide as deciding
from adapters.dispatch.handlers import retry as retrying
from adapters.dispatch.handlers import stop as stopping
from adapters.dispatch.handlers.ask import Answering, Reply
from adapters.dispatch.handlers.stop import Named, nobody
from adapters.dispatch.intents import Ask, Decide, Intent, Retry, Stop, Where
from adapters.dispatch.outcome import Done, Drop, Outcome, Refusal
from core.approval import ApprovalRequest
from core.stores import EventClaims, TraceStore

W = TypeVar("W")

ReplyFor = Callable[[Admitted[W]], Reply]
"""The surface's reply to an admitted ask (its record, ``who``, is the burst's first event's)."""
Answer = Callable[[Ticket[W], Reply], Coroutine[Any, Any, None]]
"""What runs an admitted ask to its end (``Answering.answer``, or a surface's wrapper of it
that keeps its own count of answers going)."""
Ack = Callable[[], Awaitable[None]]
"""The surface's ack of an admitted ask, before its run starts (``dispatch(admitted=)``)."""


class Dispatcher(Generic[W]):
    """The claim and burst checks over one surface's ``Answering``."""

    def __init__(self, answering: Answering[W], *, claims: EventClaims, traces: TraceStore) -> None:
        self.answering = answering
        self.policy = answering.policy
        self.claim = Claim(claims)
        self.burst: Burst[W] = Burst(self.policy)
        self.retry_once = RetryOnce(claims)
        """Retry asks an interrupted run's question again once, however many press it."""
        self.traces = traces

    def conversation(self, where: Where, *, root: str | None = None) -> str:
        return conversation_of(where, self.policy, root=root)

    async def dispatch(
        self,
        ask: Ask[W],
        reply: ReplyFor[W],
        *,
        answer: Answer[W] | None = None,
        admitted: Ack | None = None,
    ) -> Outcome:
        """Claim, gather, admit; an admitted ask is acked (``admitted``: the surface's ack,
        once every check passed; when it raises, the ask's room is given back and nothing
        runs) and answered through ``reply(admitted)`` (the surface's reply to the first
        message of a burst) in a task of the answering pipeline's (``answer``: how; default
        ``Answering.answer``). Returns once the outcome is known."""
        admission = Admission(ask, self.policy)
        dropped = await self.claim(admission) or await self.burst(admission)
        if dropped is not None:
            return dropped
        ticket = await self.answering.admit(self._admitted(admission.intent))
        if isinstance(ticket, Refusal):
            return ticket
        if admitted is not None:
            try:
                await admitted()
            except BaseException:
                await ticket.give_back()
                raise
        run = answer or self.answering.answer
        self.answering.spawn(run(ticket, reply(ticket.ask)))
        return Done()

    async def retry(
        self,
        intent: Retry,
        ask: Callable[[str], Ask[W]],
        reply: ReplyFor[W],
        *,
        answer: Answer[W] | None = None,
        admitted: Ack | None = None,
    ) -> Outcome:
        """A Retry press: claimed once (a redelivery: Drop), the run taken once
        (``handlers.retry``), its question (``ask(question)``: the surface's ask of it by
        the presser, where they pressed) through ``dispatch`` without gathering, and the run
        given back when that is refused."""
        if await self._redelivered(intent):
            return Drop("duplicate")

        async def again(question: str) -> Outcome:
            asked = replace(ask(question), event=f"{intent.event}:ask", gathers=False)
            return await self.dispatch(asked, reply, answer=answer, admitted=admitted)

        return await retrying.ask_again(
            intent.run_id, intent.places, traces=self.traces, once=self.retry_once, ask=again
        )

    async def stop(self, intent: Stop, *, named: Named = nobody) -> Outcome:
        """A Stop press, claimed once (a redelivery: Drop): ``named`` shows the asker in a
        refusal (the surface's mention)."""
        if await self._redelivered(intent):
            return Drop("duplicate")
        return await stopping.stop(intent, self.answering, named=named)

    async def waiting(self, intent: Decide, *, named: Named = nobody) -> ApprovalRequest | Refusal:
        """The request an Edit… or Deny… press may decide, for the surface's form; or why
        not."""
        return await deciding.waiting(intent, self.answering, named=named)

    async def decide(
        self, intent: Decide, *, named: Named = nobody, checked: ApprovalRequest | None = None
    ) -> Outcome:
        """Decide, the press claimed once (a redelivery: Drop; ``waiting`` claims
        nothing: a form opened on a press is decided by its own submission's event)."""
        if await self._redelivered(intent):
            return Drop("duplicate")
        return await deciding.decide(intent, self.answering, named=named, checked=checked)

    async def _redelivered(self, intent: Intent) -> bool:
        return await self.claim(Admission(intent, self.policy)) is not None

    @staticmethod
    def _admitted(ask: Ask[W]) -> Admitted[W]:
        """The ask as the admission chain reads it; its event id is its run slot's id."""
        return Admitted(
            who=ask.who,
            actor=ask.actor,
            at=ask.where,
            place=settings_place(ask.where),
            question=ask.question,
            ident=ask.event,
            model=ask.model,
            files=ask.files,
            earlier=ask.earlier,
            channel_name=ask.where.name,
            where=ask.memories,
            schedule=schedule.place_of(ask.where),
        )
