"""The checks an intent passes before its handler, each written once for every surface.

A check looks at one ``Admission`` (the intent, possibly merged, and the surface's policy)
and says "go on" (None), ``Drop`` (nothing to say) or ``Refusal``. Here: ``Claim`` (each
event once, whichever process receives it, however often the platform delivers it) and
``Burst`` (``agent.merge_window``). The admission checks that hold room (bounds, model,
budget, cooldown, room, slot) still run in ``adapters.answering`` (plan slice 7: they move
here next).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from adapters.dispatch.bursts import Bursts
from adapters.dispatch.conversation import burst_key
from adapters.dispatch.intents import Ask, Intent
from adapters.dispatch.outcome import Drop
from adapters.policy import Policy
from core.stores import EventClaims

IntentT = TypeVar("IntentT", bound=Intent)
W = TypeVar("W")


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
