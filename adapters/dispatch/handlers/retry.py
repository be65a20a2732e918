"""Retry under an interrupted answer, on every surface: which question it asks again, and
that it asks it once.

::

    Retry pressed (a run id from the button, the places the press came from)
      -> the run's stored trace, from its own conversation only (``decisions.may_retry``),
         else ``words.RETRY_GONE``
      -> ``RetryOnce``: the first press takes the run, a later one hears ``words.RETRY_DONE``
      -> the trace's question asked through ``Dispatcher.dispatch`` (``Dispatcher.retry``),
         and the run given back (``RetryOnce.give_back``) when that is refused or fails,
         so Retry may be pressed again
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection

from adapters import words
from adapters.decisions import may_retry
from adapters.dispatch.checks import RetryOnce
from adapters.dispatch.outcome import Done, Outcome, Refusal
from core.errors import StoreUnavailable
from core.stores import TraceStore
from core.trace import Trace


async def retried(
    run_id: str, places: Collection[str], *, traces: TraceStore, once: RetryOnce
) -> Trace | Refusal:
    """The interrupted run's trace, its question to be asked again now (the run is taken:
    give it back if that question is refused), or why not."""
    try:
        trace = await traces.get(run_id)
    except StoreUnavailable:
        trace = None
    if trace is None or not trace.question or not may_retry(trace.conversation, places):
        return Refusal("gone", words.RETRY_GONE)
    if not await once.take(run_id):
        return Refusal("retried", words.RETRY_DONE)
    return trace


async def ask_again(
    run_id: str,
    places: Collection[str],
    *,
    traces: TraceStore,
    once: RetryOnce,
    ask: Callable[[str], Awaitable[Outcome]],
) -> Outcome:
    """The whole Retry for any surface: ``retried``, then ``ask`` (the surface's way of
    asking the trace's question through ``Dispatcher.dispatch``, ``gathers=False``), and the
    run given back when that is not admitted, so Retry may be pressed again."""
    trace = await retried(run_id, places, traces=traces, once=once)
    if isinstance(trace, Refusal):
        return trace
    try:
        outcome = await ask(trace.question)
    except BaseException:
        await asyncio.shield(once.give_back(run_id))
        raise
    if not isinstance(outcome, Done):
        await once.give_back(run_id)
    return outcome
