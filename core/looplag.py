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
counts its budget down in ticks of ``TICK`` seconds (one timer per loop counts every wait down),
and each tick counts as the time it asked for, however late it ran (a loop blocked for 0.5 s in every 0.55 s counts 0.05 s
of each). A wait that ends when the loop is punctual ends as before; while the
loop is late (a burst of work, a long collection), a wait whose answer arrived meanwhile is
not failed for the loop's own delay. The Redis client's pool waits and socket reads use it
(``core.stores.redis``), so a late loop no longer sends conversations on without memory.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections import deque
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType

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


class _Ticks:
    """The one timer that counts every ``on_time`` wait of a loop down (per tick length):
    it runs every ``tick`` seconds while a wait is open and stops when none is. A wait costs
    an entry in a dict, not a timer of its own scheduled and cancelled (three per Redis
    command: the pool's wait, the write and the read), so a cancelled timer no longer
    lingers in the loop's heap for each."""

    __slots__ = ("handle", "loop", "tick", "waits")

    def __init__(self, loop: asyncio.AbstractEventLoop, tick: float) -> None:
        self.loop = loop
        self.tick = tick
        self.waits: dict[asyncio.Timeout, int] = {}
        """Each open wait's deadline and the ticks it has left."""
        self.handle: asyncio.TimerHandle | None = None

    def add(self, deadline: asyncio.Timeout, ticks: int) -> None:
        self.waits[deadline] = ticks
        if self.handle is None:
            self.handle = self.loop.call_later(self.tick, self._tick)

    def _tick(self) -> None:
        self.handle = None
        waits = self.waits
        for deadline, left in list(waits.items()):
            if left > 1:
                waits[deadline] = left - 1
                continue
            del waits[deadline]
            # Expires on the loop's next turn: a wake-up queued before it (a reply read
            # while the loop was late) runs first, and its wait ends without a timeout.
            deadline.reschedule(self.loop.time())
        if waits:
            self.handle = self.loop.call_later(self.tick, self._tick)


_TICKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[float, _Ticks]] = (
    weakref.WeakKeyDictionary()
)


class _OnTime:
    __slots__ = ("_deadline", "_seconds", "_tick", "_ticks")

    def __init__(self, seconds: float, tick: float) -> None:
        self._seconds = max(seconds, 0.0)
        self._tick = tick
        self._deadline: asyncio.Timeout | None = None
        self._ticks: _Ticks | None = None

    async def __aenter__(self) -> None:
        deadline = self._deadline = asyncio.timeout(None)
        await deadline.__aenter__()
        loop = asyncio.get_running_loop()
        seconds, tick = self._seconds, self._tick
        if tick <= 0 or seconds <= 0:  # no ticks: a plain deadline
            deadline.reschedule(loop.time() + seconds)
            return
        per_loop = _TICKS.get(loop)
        if per_loop is None:
            per_loop = _TICKS[loop] = {}
        ticks = per_loop.get(tick)
        if ticks is None:
            ticks = per_loop[tick] = _Ticks(loop, tick)
        # The first tick comes within ``tick`` of now, not a whole one after: it is not
        # counted, so the wait is given at least ``seconds`` (and at most a tick more).
        ticks.add(deadline, math.ceil(seconds / tick - 1e-9) + 1)
        self._ticks = ticks

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        deadline = self._deadline
        assert deadline is not None, "entered first"
        if self._ticks is not None:
            self._ticks.waits.pop(deadline, None)  # its timer stops at its next tick if idle
        await deadline.__aexit__(exc_type, exc, tb)  # raises TimeoutError once expired


class _NoLimit:
    __slots__ = ()

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *_: object) -> None:
        return None


_NO_LIMIT = _NoLimit()


def on_time(seconds: float | None, *, tick: float = TICK) -> AbstractAsyncContextManager[None]:
    """``asyncio.timeout(seconds)`` that does not count the loop's lateness: the budget is
    counted down in ticks of ``tick`` seconds, each counting as asked however late it ran;
    ``TimeoutError`` when it is spent (after ``seconds``, at most a tick more, when the loop
    is punctual). ``None``: no limit. Every wait of the loop is counted by one shared timer
    (``_Ticks``), so a wait that ends within its first tick (nearly all of them) costs no
    timer of its own. ``tick=0``: a plain ``asyncio.timeout``."""
    if seconds is None:
        return _NO_LIMIT
    return _OnTime(seconds, tick)
