"""The intents that start no run, through one chain for every surface: ``Commands.dispatch``.

::

    platform event --(the surface translates)--> Reset | ShowTrace | Vote | Settings | Usage
      -> the checks the intent declares (``intent.checks``), each written once here:
           claim            each event once (a redelivery: Drop, said nothing)
           access           who may use the bot here (``adapters.dispatch.access``)
           admin            an admin only (a change of the place's settings); in a web
                            session, its own person (nobody else is there)
           admin_in_shared  an admin only where others share the conversation (a reset in
                            a channel, a group, a Discord thread the bot opened); anyone in
                            a DM, a web session, or a thread that is its own conversation
      -> its handler (``adapters.dispatch.handlers``) -> Said (the shared words)
      -> Outcome: Refusal or Said for the surface to show, privately where it can; Drop

A surface never decides who may do these, and never words their replies.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import assert_never

from adapters import words
from adapters.dispatch.access import Access
from adapters.dispatch.handlers import reset, settings, trace, usage, vote
from adapters.dispatch.handlers.services import Services
from adapters.dispatch.intents import (
    CheckName,
    Command,
    Reset,
    Settings,
    ShowTrace,
    Usage,
    Vote,
    Where,
)
from adapters.dispatch.outcome import Drop, Refusal, Said
from adapters.policy import Policy

Admitted = Callable[[], Awaitable[None]]


def shared(where: Where, policy: Policy) -> bool:
    """Whether others share the conversation at ``where`` (plan decision 6): a channel, a
    group and its forum topics (a topic is the group's, as Telegram's admins manage it), a
    thread the bot opened on an answer (it continues its channel's conversation), a thread
    when threads are not conversations of their own (``redis.per_thread`` off)."""
    if where.kind in ("dm", "session", "assistant", "private_thread"):
        return False
    if where.kind == "thread":
        return not policy.per_thread
    return True


class Commands:
    """One surface's commands: its services, and who may ask where (``access``, over the
    same policy)."""

    def __init__(self, services: Services, *, access: Access) -> None:
        self.services = services
        self.policy = services.policy
        self.access = access

    async def dispatch(
        self, intent: Command, *, admitted: Admitted | None = None
    ) -> Refusal | Drop | Said:
        """The intent's checks in order, then its handler. ``admitted``: the surface's
        ack, once every check passed and before the handler runs (Discord's defer: a
        redelivery or a refusal is then answered without one)."""
        for check in intent.checks:
            stopped = await self._check(check, intent)
            if stopped is not None:
                return stopped
        if admitted is not None:
            await admitted()
        return await self._handle(intent)

    async def _check(self, check: CheckName, intent: Command) -> Refusal | Drop | None:
        if check == "claim":
            fresh = await self.services.stores.claims.claim(intent.event)
            return None if fresh else Drop("duplicate")
        if check == "access":
            refused = await self.access.refusal(intent.actor, intent.where)
            return Refusal("access", refused) if refused is not None else None
        if check == "admin":
            mine = intent.actor.admin or intent.where.kind == "session"
            return None if mine else Refusal("who", words.ONLY_ADMINS)
        if check == "admin_in_shared":
            mine = intent.actor.admin or not shared(intent.where, self.policy)
            return None if mine else Refusal("who", words.RESET_ADMINS)
        assert_never(check)

    async def _handle(self, intent: Command) -> Said:
        match intent:
            case Reset():
                return await reset.handle(intent, self.services)
            case ShowTrace():
                return await trace.handle(intent, self.services)
            case Vote():
                return await vote.handle(intent, self.services)
            case Settings():
                return await settings.handle(intent, self.services)
            case Usage():
                return await usage.handle(intent, self.services)
            case _:
                assert_never(intent)
