"""``ShowTrace``: the last trace of the conversation here (or of the newest of the place's
answer threads, where a command names no thread), for the surface to show as its files."""

from __future__ import annotations

from adapters import words
from adapters.dispatch.handlers.reset import conversations
from adapters.dispatch.handlers.services import Services
from adapters.dispatch.intents import ShowTrace
from adapters.dispatch.outcome import Said
from core.errors import StoreUnavailable
from core.trace import Trace

LOOKED_AT = 20
"""Conversations of a place read for its last trace (its newest answer threads)."""


async def handle(intent: ShowTrace, services: Services) -> Said:
    threads = list(await intent.threads())[:LOOKED_AT] if intent.threads is not None else []
    found: list[Trace] = []
    try:
        for conversation in await conversations(intent.where, services, threads):
            trace = await services.stores.traces.last(conversation)
            if trace is not None:
                found.append(trace)
    except StoreUnavailable:
        return Said(words.STORE_AWAY)
    if not found:
        return Said(words.NO_TRACE)
    last = max(found, key=lambda t: t.started_at)
    return Said(words.trace_shown(last.question), trace=last)
