"""How late the event loop runs, and waits that do not count its lateness against anyone.

``LoopLag`` is one cheap probe per process: a timer asks to run every ``interval`` seconds
(``loop.call_later``) and records how much later than asked it ran. That lateness is what
every other callback of the loop waited too, so it is the process's own measure of overload:
admission refuses new questions while it is past ``ops.max_loop_lag``
(``adapters.room.Room``), and ``/metrics`` shows its samples
(``reactbot_event_loop_lag_seconds``). ``lag()`` is the worst of the last ``window`` seconds,
or the time the probe is overdue right now when that is more (a loop stuck in one callback
shows at once, not a sample later).

``on_time(seconds)`` is ``asyncio.timeout(seconds)`` measured in the loop's punctual time: it
counts its budget down in timer ticks of at most ``TICK`` seconds, and each tick counts as the
time it asked for, however late it ran (a loop blocked for 0.5 s in every 0.55 s counts 0.05 s
of each). A wait that ends when the loop is punctual ends as before; while the
loop is late (a burst of work, a long collection), a wait whose answer arrived meanwhile is
not failed for the loop's own delay. The Redis client's pool waits and socket reads use it
(``core.stores.redis``), so a late loop no longer sends conversations on without memory.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

INTERVAL = 0.1
"""Seconds between two samples: ten timer callbacks a second, nothing else."""
WINDOW = 1.0
"""Seconds of samples ``lag()`` takes the worst of."""
TICK = 0.05
"""Seconds an ``on_time`` tick asks for at most: the lateness it cannot see is below this."""


class LoopLag:
    """The running loop's lateness, sampled every ``interval`` seconds once ``start``-ed."""

    def __init__(self, *, interval: float = INTERVAL, window: float = WINDOW) -> None:
        self.interval = interval
        self.window = window
        self.listeners: list[Callable[[float], None]] = []
        """Called with each sample, in seconds (the ops endpoint's histogram)."""
        self.samples = 0
        self._recent: deque[tuple[float, float]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0

    @property
    def running(self) -> bool:
        return self._handle is not None

    def start(self) -> None:
        """Begin sampling the running loop (a no-op when already sampling)."""
        if self._handle is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._schedule()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def lag(self) -> float:
        """Seconds: the worst lateness of the last ``window`` seconds, or how overdue the
        probe is now if more; 0 before ``start``."""
        if self._loop is None or self._handle is None:
            return 0.0
        now = self._loop.time()
        recent = self._recent
        while recent and recent[0][0] < now - self.window:
            recent.popleft()
        worst = max((late for _, late in recent), default=0.0)
        return max(worst, now - self._due)

    def _schedule(self) -> None:
        assert self._loop is not None
        self._due = self._loop.time() + self.interval
        self._handle = self._loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        assert self._loop is not None
        now = self._loop.time()
        late = max(0.0, now - self._due)
        self._recent.append((now, late))
        if len(self._recent) > 4 * self.window / self.interval:  # bounded whatever the clock
            self._recent.popleft()
        self.samples += 1
        for listener in self.listeners:
            listener(late)
        self._schedule()


@asynccontextmanager
async def on_time(seconds: float | None, *, tick: float = TICK) -> AsyncIterator[None]:
    """``asyncio.timeout(seconds)`` that does not count the loop's lateness: the budget is
    counted down in ticks of at most ``tick`` seconds, each counting as asked however late it
    ran; ``TimeoutError`` when it is spent. ``None``: no limit. A wait that ends within its
    first tick (nearly all of them) costs one timer, scheduled and cancelled."""
    if seconds is None:
        yield
        return
    loop = asyncio.get_running_loop()
    left = max(seconds, 0.0)
    step = min(left, tick) if tick > 0 else left
    async with asyncio.timeout(None) as deadline:
        handle: asyncio.TimerHandle | None = None

        def counted() -> None:
            nonlocal left, handle
            left -= min(step, left)
            if left <= 1e-9:
                # Expires on the loop's next turn: a wake-up queued before it (a reply read
                # while the loop was late) runs first, and its wait ends without a timeout.
                deadline.reschedule(loop.time())
                handle = None
            else:
                handle = loop.call_later(min(step, left), counted)

        if step <= 0:
            deadline.reschedule(loop.time())
        else:
            handle = loop.call_later(step, counted)
        try:
            yield
        finally:
            if handle is not None:
                handle.cancel()
