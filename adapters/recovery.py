"""Crash recovery: no answer stays "thinking" when the process writing it dies.

Each process registers the answers it is writing (``core.stores.RunRegistry``: the run, its
conversation, the platform's reference to its message, the person's run slot, and the trace
so far). Each answer then keeps its own record, on its own timer: when one of its steps
ends (its observation is in) the step is added to the record, and the record's head (the
trace without its steps) is written again only when it changed; with nothing new, every
``beat_every`` seconds, the heartbeat alone is renewed. So a write costs what changed in
one run: no beat walks every run, and no trace is written twice. Every process also
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
from dataclasses import dataclass, field, replace

from core.agent import Run
from core.budgets import Hold, TokenBudgets
from core.events import Event, ObservationReady
from core.prompt import question_message
from core.stores import TRACE_SNAPSHOT_CHARS, RunRecord, Stores, step_json, trace_head
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
    head: str = ""
    """The head as last written (the trace without its steps)."""
    written: int = 0
    """How many of the trace's steps the record holds."""
    room: int = TRACE_SNAPSHOT_CHARS
    """Characters of steps the record may still take; a step beyond them is left out (with
    every one after it: a trace with a hole would mislead)."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


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
        self._ending: set[str] = set()
        """Runs of ours whose end is being written: never orphans to this process."""
        self._task: asyncio.Task[None] | None = None
        self._finishing: set[asyncio.Task[None]] = set()
        """Orphans taken at a press (``left_by_the_dead``), being finished."""

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
        """Register ``run`` at once (a crash a second later is recovered too); once the
        loop runs (``start``), the run keeps its record on its own timer."""
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
        await self._register(tracked)
        if self._task is not None:
            self._keep_on(tracked)

    async def untrack(self, run_id: str) -> None:
        tracked = self._tracked.pop(run_id, None)
        if tracked is None:
            return
        # Until its record is gone, a sweep here must not take the answer for an orphan (its
        # record may look silent: a loop that stalled past the lease).
        self._ending.add(run_id)
        try:
            if tracked.task is not None:
                tracked.task.cancel()
                await asyncio.wait({tracked.task})
            # An update on its way when the run ended finds it gone and leaves it so (the
            # registry's ``update`` never brings back a run that is not registered).
            await self.registry.end(self.surface, run_id)
        finally:
            self._ending.discard(run_id)

    async def keep(self, run_id: str) -> None:
        """Write what changed in ``run_id`` since its last write (its new steps, its head
        if it changed), or renew its heartbeat alone. A write that did not reach the
        store (it was down, or the run's record was taken while this process stalled)
        is made whole: the record again, with every step so far."""
        tracked = self._tracked.get(run_id)
        if tracked is None:
            return
        trace = tracked.run.trace
        head = trace_head(trace)
        steps, room = self._new_steps(tracked)
        changed = head != tracked.head
        record = replace(tracked.record, trace=head) if changed else None
        if await self.registry.update(
            self.surface, run_id, steps=steps, record=record, at=self._clock()
        ):
            tracked.written += len(steps)
            tracked.room, tracked.head = room, head
        elif run_id in self._tracked:
            await self._register(tracked)
            if run_id not in self._tracked:  # it ended meanwhile: leave nothing behind
                await self.registry.end(self.surface, run_id)

    def _new_steps(self, tracked: _Tracked) -> tuple[list[str], int]:
        """The JSON of the steps finished since the last write that still fit, and the room
        left after them. A step is finished once its observation is in or a step follows
        it; the one being written is left for the next write."""
        trace, room = tracked.run.trace, tracked.room
        finished = len(trace.steps)
        if finished and trace.steps[-1].observation is None and trace.steps[-1].error is None:
            finished -= 1
        steps: list[str] = []
        for index in range(tracked.written, finished):
            text = step_json(trace, index)
            if len(text) > room:
                room = -1  # this step and every later one stay out
                break
            steps.append(text)
            room -= len(text)
        return steps, room

    async def _register(self, tracked: _Tracked) -> None:
        """The record whole: its head, then its finished steps as far as they fit (the
        record holds a head; its steps are always added to it)."""
        head = trace_head(tracked.run.trace)
        tracked.written, tracked.room, tracked.head = 0, TRACE_SNAPSHOT_CHARS - len(head), ""
        run_id, at = tracked.record.run_id, self._clock()
        await self.registry.beat([replace(tracked.record, trace=head)], at=at)
        steps, room = self._new_steps(tracked)
        if steps:
            await self.registry.update(self.surface, run_id, steps=steps, at=at)
        tracked.written, tracked.room, tracked.head = len(steps), room, head

    async def watched(self, run_id: str, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        """``events`` as they come; a finished step has its run's record written at once,
        so what a dead process leaves is at most the step it was writing."""
        tracked = self._tracked.get(run_id)
        async for event in events:
            yield event
            if tracked is not None and isinstance(event, ObservationReady):
                tracked.wake.set()

    async def running(self, run_id: str) -> bool:
        return run_id in self._tracked or await self.registry.running(self.surface, run_id)

    def _keep_on(self, tracked: _Tracked) -> None:
        run_id = tracked.run.trace.id
        tracked.task = asyncio.create_task(self._keeping(tracked), name=f"recovery:{run_id}")

    async def _keeping(self, tracked: _Tracked) -> None:
        """One run's own timer: a write when a step ends, the heartbeat every
        ``beat_every`` seconds."""
        run_id = tracked.run.trace.id
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.beat_every):
                    await tracked.wake.wait()
            tracked.wake.clear()
            try:
                await self.keep(run_id)
            except Exception:  # the next write tries again
                log.exception("crash recovery could not write run %s this time", run_id)

    # ---- the others' ----------------------------------------------------------------------
    async def sweep(self) -> int:
        """Finish the answers of this surface whose process stopped beating; how many."""
        silent_since = self._clock() - self.orphan_after
        finished = 0
        for run_id in await self.registry.orphans(self.surface, silent_since=silent_since):
            if run_id in self._tracked or run_id in self._ending:  # ours, only late (a stalled
                continue  # loop): beat it instead, or let it end
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

    async def left_by_the_dead(self, run_id: str) -> bool:
        """Whether ``run_id``'s process died (its heartbeat is older than ``orphan_after``):
        then it is taken now, its message finished in a task of this recovery's (as the
        next sweep would), and True. A press on it is told the truth at once: no process
        runs it any more."""
        if run_id in self._tracked or run_id in self._ending:
            return False
        silent_since = self._clock() - self.orphan_after
        left = await self.registry.orphans(self.surface, silent_since=silent_since, limit=100)
        if run_id not in left:
            return False
        record = await self.registry.claim(self.surface, run_id)
        if record is not None:  # else another process took it: it finishes it
            task = asyncio.create_task(self._finish(record), name=f"recovery:finish:{run_id}")
            self._finishing.add(task)
            task.add_done_callback(self._finished)
        return True

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._finishing.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("could not finish a run a dead process left", exc_info=task.exception())
        else:
            self.recovered += 1

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
        """Look for orphans every ``SWEEP_EVERY`` seconds, and keep each tracked run's
        record on its own timer."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=f"recovery:{self.surface}")
            for tracked in self._tracked.values():
                if tracked.task is None:
                    self._keep_on(tracked)

    async def _loop(self) -> None:
        sweep_every = min(self.beat_every, SWEEP_EVERY)
        while True:
            try:
                await self.sweep()
            except Exception:  # the next round tries again
                log.exception("crash recovery on %s failed this round", self.surface)
            await asyncio.sleep(sweep_every)

    async def aclose(self) -> None:
        if self._finishing:  # a dead process's message half-finished would stay so
            await asyncio.wait(self._finishing, timeout=5.0)
        tasks = [t for t in (self._task, *(k.task for k in self._tracked.values())) if t]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        self._task = None
        for tracked in self._tracked.values():
            tracked.task = None
