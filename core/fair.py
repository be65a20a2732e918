"""A few places shared fairly among owners (the file workers among the people whose files
they read)::

    slots = FairSlots(2)
    async with slots.hold("slack:T1:U1", on_queue=said):   # waits its turn
        ...                                                # one of the 2 places is ours

Each owner holds at most one place at a time: its second file waits for its first, even
when places are free. When a place frees, it goes to the waiting owner whose last turn began
longest ago (one who never had one first; among equals, the one waiting longest). So one
person's ten files are read one by one, with everyone else's going between them, and six
people's files at once are read two by two in the order they came.

``on_queue(True)`` is called once an owner has waited ``notice_after`` seconds, and
``on_queue(False)`` when it then gets its place: what its live message says meanwhile.
Waiting is cancellable at any moment (a Stop): a cancelled waiter leaves the queue, and a
place granted as it was cancelled goes on to the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import deque
from collections.abc import AsyncIterator, Callable, Hashable

__all__ = ["FairSlots", "OnQueue"]

OnQueue = Callable[[bool], None]
"""Told True when a waiter has waited ``notice_after`` seconds, then False at its turn."""


class FairSlots:
    """``places`` places, one per owner at a time, handed out least-recently-served first."""

    def __init__(self, places: int, *, notice_after: float = 3.0) -> None:
        if places < 1:
            raise ValueError("places >= 1")
        self.places = places
        self.notice_after = notice_after
        self._free = places
        self._holding: set[Hashable] = set()
        self._waiting: dict[Hashable, deque[asyncio.Future[None]]] = {}
        self._turn_began: dict[Hashable, int] = {}
        """Owners with a place or a waiter: the tick their last turn began (newcomers: 0)."""
        self._ticks = itertools.count(1)
        self.turns: list[Hashable] = []
        """The owners in the order their turns began (the last thousand; tests, benchmarks)."""

    @property
    def waiting(self) -> int:
        """Waiters in the queue, every owner's."""
        return sum(len(queue) for queue in self._waiting.values())

    @contextlib.asynccontextmanager
    async def hold(
        self, owner: Hashable | None = None, *, on_queue: OnQueue | None = None
    ) -> AsyncIterator[None]:
        """A place for ``owner`` (None: an owner of its own) while the block runs."""
        key: Hashable = owner if owner is not None else object()
        await self._acquire(key, on_queue)
        try:
            yield
        finally:
            self._release(key)

    async def _acquire(self, owner: Hashable, on_queue: OnQueue | None) -> None:
        # Free places are always handed to eligible waiters at once (``_hand_out``), so a
        # free place now means nobody waiting may have it: a newcomer takes it.
        if self._free > 0 and owner not in self._holding:
            self._turn_began.setdefault(owner, 0)
            self._grant(owner)
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._turn_began.setdefault(owner, 0)
        self._waiting.setdefault(owner, deque()).append(granted)
        try:
            if on_queue is None:
                await granted
                return
            done, _ = await asyncio.wait([granted], timeout=self.notice_after)
            if not done:
                on_queue(True)
                await granted
                on_queue(False)
        except BaseException:
            if granted.done() and not granted.cancelled():
                self._release(owner)  # granted as it was cancelled: the place goes on
            else:
                granted.cancel()
                self._leave(owner, granted)
            raise

    def _grant(self, owner: Hashable) -> None:
        self._free -= 1
        self._holding.add(owner)
        self._turn_began[owner] = next(self._ticks)
        self.turns.append(owner)
        del self.turns[:-1000]

    def _release(self, owner: Hashable) -> None:
        self._free += 1
        self._holding.discard(owner)
        self._hand_out()
        self._forget_if_idle(owner)

    def _leave(self, owner: Hashable, granted: asyncio.Future[None]) -> None:
        queue = self._waiting.get(owner)
        if queue is not None:
            with contextlib.suppress(ValueError):
                queue.remove(granted)
            if not queue:
                del self._waiting[owner]
        self._forget_if_idle(owner)

    def _hand_out(self) -> None:
        while self._free > 0:
            eligible = [o for o in self._waiting if o not in self._holding]
            if not eligible:
                return
            # min() keeps the first of equals: dict order is the order owners began waiting.
            owner = min(eligible, key=self._turn_began.__getitem__)
            queue = self._waiting[owner]
            granted = queue.popleft()
            if not queue:
                del self._waiting[owner]
            if granted.done():  # cancelled, its task not yet resumed to leave the queue
                continue
            self._grant(owner)
            granted.set_result(None)

    def _forget_if_idle(self, owner: Hashable) -> None:
        if owner not in self._holding and owner not in self._waiting:
            self._turn_began.pop(owner, None)
