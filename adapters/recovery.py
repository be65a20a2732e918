"""Crash recovery: no answer stays "thinking" when the process writing it dies.

Each process registers the answers it is writing (``core.stores.RunRegistry``: the run, its
conversation, the platform's reference to its message, the person's run slot, and the trace
so far) and renews them with a heartbeat every ``beat_every`` seconds. Every process also
looks, every second (``SWEEP_EVERY``), for answers of its surface whose heartbeat stopped
``orphan_after`` seconds ago: their process died (``kill -9``, an OOM kill, a lost
machine). One live process claims each (atomically: exactly one does) and finishes it:

- the message says "⚠️ Interrupted: the bot restarted while answering. Ask again." (the
  surface's ``Finalise``: Discord and Slack edit the message, with a Retry button);
- the trace so far is stored with status ``interrupted``;
- the question goes into the conversation's history, with a note that it was not answered;
- the person's run slot is given back (the conversation's lock lapses with its short lease);
- what its trace so far spent is counted against the budgets and its budget hold dropped
  (``core.budgets``), so the asker need not wait out the hold's lease.

A process that restarts finds its own orphans the same way: its new heartbeat has a new
owner id.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace

from core.agent import Run
from core.budgets import Hold, TokenBudgets
from core.events import Event, ObservationReady
from core.prompt import question_message
from core.storage import Stores
from core.stores import RunRecord, snapshot
from core.trace import Trace

log = logging.getLogger(__name__)

INTERRUPTED = "⚠️ Interrupted: the bot restarted while answering. Ask again."
HISTORY_NOTE = "(No answer: the bot restarted while answering this question.)"
BEAT_EVERY = 5.0
SWEEP_EVERY = 1.0
"""Seconds between looks for orphans (at most): one is found this soon after its lease
lapsed, so a dead process's answer is finished within ``ORPHAN_AFTER`` + this + one edit
of its last heartbeat. (Looking only at each heartbeat made that ``ORPHAN_AFTER`` + 5 s:
the whole 30 s promised, with nothing left for the edit.) A look is one small read."""
ORPHAN_AFTER = 25.0
"""Seconds without a heartbeat before an answer counts as its process's orphan. The
conversation locks and run slots have leases this long too (renewed by live runs), so the
next question never waits longer for a dead one."""

Finalise = Callable[[RunRecord, Trace, str], Awaitable[None]]
"""The surface's last edit of an orphan's message: its record, its trace, the words."""


@dataclass(slots=True)
class _Tracked:
    run: Run
    record: RunRecord


class Recovery:
    """The heartbeat of this process's answers on one surface, and the finishing of the
    answers that dead processes left there."""

    def __init__(
        self,
        stores: Stores,
        *,
        surface: str,
        finalise: Finalise | None = None,
        budgets: TokenBudgets | None = None,
        beat_every: float = BEAT_EVERY,
        orphan_after: float = ORPHAN_AFTER,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.stores = stores
        self.registry = stores.runs
        self.surface = surface
        self.finalise = finalise
        self.budgets = budgets
        """Settles an orphan's budget hold with what its trace spent (None: nobody counts)."""
        self.beat_every = beat_every
        self.orphan_after = orphan_after
        self.owner = secrets.token_hex(8)
        """This process, as its records name it (new at every start)."""
        self.recovered = 0
        """Orphans this process finished."""
        self._clock = clock
        self._tracked: dict[str, _Tracked] = {}
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    # ---- this process's answers ---------------------------------------------------------
    async def track(
        self,
        run: Run,
        *,
        conversation: str,
        where: dict[str, str],
        asker_key: str,
        slot: str,
        place: str = "",
        held: Hold | None = None,
        asker: str = "",
    ) -> None:
        """Register ``run`` at once (a crash a second later is recovered too)."""
        record = RunRecord(
            run_id=run.trace.id,
            surface=self.surface,
            conversation=conversation,
            owner=self.owner,
            where=where,
            asker_key=asker_key,
            slot=slot,
            place=place,
            held=held.counters if held is not None else (),
            asker=asker,
        )
        tracked = self._tracked[run.trace.id] = _Tracked(run, record)
        await self.registry.beat([self._current(tracked)], at=self._clock())

    async def untrack(self, run_id: str) -> None:
        if self._tracked.pop(run_id, None) is not None:
            await self.registry.end(self.surface, run_id)

    def _current(self, tracked: _Tracked) -> RunRecord:
        return replace(tracked.record, trace=snapshot(tracked.run.trace))

    async def beat(self) -> None:
        """Renew every answer this process is writing. An answer that ended while its beat
        was on the way is ended again after it: the beat may have reached the store after
        the end and put it back, and ``orphan_after`` later a sweep (this process's own:
        it no longer tracks it) would have finished the answered message as "Interrupted"."""
        records = [self._current(t) for t in list(self._tracked.values())]
        await self.registry.beat(records, at=self._clock())
        for record in records:
            if record.run_id not in self._tracked:
                await self.registry.end(self.surface, record.run_id)

    async def watched(self, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        """``events`` as they come; a finished step makes the next heartbeat come at once,
        so what a dead process leaves is at most the step it was writing."""
        async for event in events:
            yield event
            if isinstance(event, ObservationReady):
                self._wake.set()

    async def running(self, run_id: str) -> bool:
        return run_id in self._tracked or await self.registry.running(self.surface, run_id)

    # ---- the others' ----------------------------------------------------------------------
    async def sweep(self) -> int:
        """Finish the answers of this surface whose process stopped beating; how many."""
        silent_since = self._clock() - self.orphan_after
        finished = 0
        for run_id in await self.registry.orphans(self.surface, silent_since=silent_since):
            if run_id in self._tracked:  # ours, only late (a stalled loop): beat it instead
                continue
            record = await self.registry.claim(self.surface, run_id)
            if record is None:  # another process took it
                continue
            try:
                await self._finish(record)
                finished += 1
            except Exception:
                log.exception("could not finish run %s, left by a process that died", run_id)
        self.recovered += finished
        return finished

    async def _finish(self, record: RunRecord) -> None:
        trace = Trace.from_json(record.trace) if record.trace else None
        if trace is None:
            trace = Trace(question="", conversation=record.conversation, id=record.run_id)
        trace.status = "interrupted"
        trace.reason = "the bot restarted while answering"
        trace.ended_at = self._clock()
        log.warning(
            "run %s in %s was left by a process that died: finished as interrupted",
            record.run_id,
            record.conversation,
        )
        try:
            await self.stores.traces.save(trace)
            if trace.question:
                await self.stores.history.append(
                    record.conversation,
                    question_message(trace.question),
                    {"role": "assistant", "content": HISTORY_NOTE},
                )
            if record.asker_key and record.slot:
                await self.stores.slots.give_back(record.asker_key, record.slot)
            if self.budgets is not None and record.asker_key and record.place:
                held = Hold(record.slot, record.held)
                await self.budgets.count(record.asker_key, record.place, trace, hold=held)
        except Exception:  # the message is still finished below
            log.exception("could not store what run %s left", record.run_id)
        if self.finalise is not None:
            await self.finalise(record, trace, INTERRUPTED)

    # ---- the loop -------------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=f"recovery:{self.surface}")

    async def _loop(self) -> None:
        sweep_every = min(self.beat_every, SWEEP_EVERY)
        next_beat = next_sweep = 0.0
        while True:
            now = time.monotonic()
            try:
                if self._wake.is_set() or now >= next_beat:
                    self._wake.clear()
                    next_beat = now + self.beat_every
                    await self.beat()
                if now >= next_sweep:
                    next_sweep = now + sweep_every
                    await self.sweep()
            except Exception:  # the next round tries again
                log.exception("crash recovery on %s failed this round", self.surface)
            pause = min(next_beat, next_sweep) - time.monotonic()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, pause)):
                    await self._wake.wait()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
