"""``Vote``: kept on the run's stored trace, one per person (a second press changes it);
only the voter hears back. A run's id is read by everyone who saw its message, so a vote
counts only from the run's own place: one naming a run of another conversation is told
what a vote on a forgotten run is told."""

from __future__ import annotations

import dataclasses
import logging

from adapters import words
from adapters.dispatch.conversation import conversation_of
from adapters.dispatch.handlers.services import Services
from adapters.dispatch.intents import PlaceKind, Vote, Where
from adapters.dispatch.outcome import Said
from adapters.policy import Policy
from core.errors import StoreUnavailable

log = logging.getLogger(__name__)


def places(where: Where, policy: Policy) -> set[str]:
    """The conversations a press at ``where`` may vote in: its own, its channel's (a thread
    the bot opened on an answer, a forum topic's group), and the one its thread started (an
    answer at a channel's top level on Slack, whose ``thread`` is the answer's message)."""
    kind: PlaceKind = where.kind if where.kind in ("dm", "session") else "channel"
    bare = dataclasses.replace(where, kind=kind, thread=None)
    return {
        conversation_of(where, policy),
        conversation_of(bare, policy),
        conversation_of(bare, policy, root=where.thread),
    }


async def handle(intent: Vote, services: Services) -> Said:
    traces, run_id = services.stores.traces, intent.run_id
    try:
        trace = await traces.get(run_id)
        here = places(intent.where, services.policy)
        if trace is None or trace.conversation not in here:
            return Said(words.VOTE_LOST)
        # the platform's id: a trace is one place's, so its voters are one platform's (and
        # one Slack workspace's); the id is what votes were kept under before
        kept = await traces.vote(run_id, intent.value, intent.actor.id)
    except StoreUnavailable as exc:
        log.warning("a vote on run %s is lost: %s", run_id, exc)
        kept = False
    return Said(words.vote_kept(intent.value) if kept else words.VOTE_LOST)
