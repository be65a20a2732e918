"""When a live message may be edited: each platform's real allowance, spent by priority.

A final state is what a person waits for, so it goes out the moment the platform allows it; a
live update is a courtesy and must never make the final one wait. Three priorities:

- ``final``: the answer, an error, "stopped", and a request for a person's approval (the run
  waits on it). No spacing; it may spend the last edit left.
- ``first``: a run's first visible update (and the bot's other writes in the channel: the
  placeholder, the thread). No spacing; it leaves one edit in the channel's bucket, and in a
  shared budget one per run still going.
- ``live``: every other update. At most one per ``live_interval`` in a channel, and it
  leaves what ``first`` leaves. Live updates coalesce in ``LiveMessage``: the latest wins.

A shared budget smaller than the runs going (Slack's 50 ``chat.update`` a minute, 50 runs at
once) therefore goes to finals and approvals first; first and live updates resume as runs
end. The runs counted are every replica's (``EditPacer.in_flight``, the run registry's count),
the ones a dead replica left included: each replica's own count alone let one replica's live
updates spend the finals of another's runs, and nobody's kept any for an orphan's.

The allowances, as the platforms count them:

- ``Window``: Discord's per-route bucket (``topics/rate-limits.mdx``): ``limit`` requests,
  then none until the bucket resets. Before the first response it assumes 5 per 5 s (a
  channel's message writes); each response's ``X-RateLimit-Limit``, ``-Remaining`` and
  ``-Reset-After`` then correct it (``observe``), with the requests still in flight counted
  as spent.
- ``SlidingWindow``: Slack's per-workspace method tiers ("50+ per minute") read strictly: at
  most ``limit`` in any ``per`` seconds, however the platform's own window is aligned.

A 429 still empties the channel (or, for a workspace-wide limit, every channel) for
``retry_after``. Waiters sleep until the earliest moment their priority could go and check
again, so an idle channel costs nothing and a busy one does not spin.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from core.errors import StoreUnavailable

if TYPE_CHECKING:
    from core.stores.resilient import StoreHealth

log = logging.getLogger(__name__)

Priority = Literal["final", "first", "live"]

DISCORD_CHANNEL_WRITES = (5, 5.0)
"""A Discord channel's message writes before its bucket's headers say otherwise."""
CHANNEL_RESERVE = 1
"""Edits a channel's live updates leave for a final state."""
RESERVE_RECHECK = 1.0
"""Seconds before a live update that the reserve alone holds back asks again (runs end)."""
IN_FLIGHT_RECHECK = 0.05
"""Seconds before an edit held back by requests still in flight asks again."""
SAME_WINDOW = 0.5
"""Two responses whose windows end this close together describe the same window."""
MAX_IDLE_CHANNELS = 1024
"""Channel states kept after they went idle (their learned limits); older idle ones go."""


class Window:
    """A fixed-window bucket, corrected by the platform's rate-limit headers."""

    def __init__(self, limit: int, per: float) -> None:
        self.limit = limit
        self.per = per
        self.remaining = limit
        self.reset_at: float | None = None
        """When the current window ends; None: no window has started."""
        self.bucket: str | None = None
        """The platform's bucket id, once a response named it."""
        self.in_flight = 0

    def _refill(self, now: float) -> None:
        if self.reset_at is not None and now >= self.reset_at:
            # A request still in flight may reach the platform after its window reset and be
            # counted in the new one.
            self.remaining = max(0, self.limit - self.in_flight)
            self.reset_at = None  # the next window starts with its first request

    def wait(self, now: float, reserve: int) -> float:
        self._refill(now)
        if self.remaining > min(reserve, self.limit - 1):
            return 0.0
        if self.reset_at is None:  # requests in flight fill a fresh window: ask again soon
            return IN_FLIGHT_RECHECK
        return max(0.0, self.reset_at - now)

    def spend(self, now: float) -> None:
        self._refill(now)
        if self.reset_at is None:
            # The platform starts it when the request arrives, a round trip's fraction later;
            # the answer's headers then say exactly when it ends (``observe``).
            self.reset_at = now + self.per
        self.remaining -= 1

    def observe(
        self, now: float, *, limit: int, remaining: int, reset_after: float, bucket: str | None
    ) -> None:
        """What a response's headers say. The request that answered is no longer in flight;
        the others may not have been counted yet, so they are taken off what is left. Answers
        about the same window may come back out of order: within it, the count only falls."""
        self.limit = max(1, limit)
        self.per = max(self.per, reset_after)
        others = max(0, self.in_flight - 1)
        left = max(0, min(self.limit, remaining - others))
        reset_at = now + reset_after
        same_window = self.reset_at is not None and abs(reset_at - self.reset_at) < SAME_WINDOW
        self.remaining = min(self.remaining, left) if same_window else left
        self.reset_at = reset_at
        self.bucket = bucket or self.bucket

    def exhaust(self, until: float) -> None:
        """A 429: nothing is left until ``until``."""
        self.remaining = 0
        self.reset_at = max(self.reset_at or until, until)

    def idle(self, now: float) -> bool:
        return self.in_flight == 0 and (self.reset_at is None or now >= self.reset_at)


class SlidingWindow:
    """At most ``limit`` requests in any ``per`` seconds, as the platform sees them.

    A request counts from when it is sent until ``per`` seconds after its answer came back:
    the platform received it somewhere in between, and a network (or event-loop) delay must
    not let the next one in before the platform's own window let the old one go."""

    def __init__(self, limit: int, per: float = 60.0) -> None:
        self.limit = max(1, limit)
        self.per = per
        self.sent: deque[float] = deque()
        """When each answered request's answer came back, oldest first."""
        self.in_flight = 0

    def _expire(self, now: float) -> None:
        while self.sent and self.sent[0] <= now - self.per:
            self.sent.popleft()

    def wait(self, now: float, reserve: int) -> float:
        self._expire(now)
        over = len(self.sent) + self.in_flight + reserve + 1 - self.limit
        if over <= 0:
            return 0.0
        if over > len(self.sent):  # requests in flight or the reserve fill it: ask again soon
            return min(self.per, IN_FLIGHT_RECHECK if self.in_flight else RESERVE_RECHECK)
        return max(0.0, self.sent[over - 1] + self.per - now)

    def spend(self, now: float) -> None:
        self.in_flight += 1

    def done(self, now: float) -> None:
        """The request's answer came back (or it failed): it expires ``per`` from now."""
        self.in_flight -= 1
        self.sent.append(now)

    def idle(self, now: float) -> bool:
        self._expire(now)
        return not self.sent and not self.in_flight

    def used(self, now: float) -> int:
        self._expire(now)
        return len(self.sent) + self.in_flight


class Budget(Protocol):
    """A rate budget every channel shares (Slack's per-workspace method limit): in this
    process (``LocalBudget``), or in Redis for every replica (``core.stores.redis``)."""

    @property
    def limit(self) -> int: ...

    async def take(self, reserve: int) -> float:
        """0.0 when one request may go now, counted from now (``done`` when it ends);
        otherwise the seconds to wait before asking again. ``reserve`` requests stay unspent."""
        ...

    async def done(self) -> None:
        """A request ``take`` granted has ended (its answer came back, or it failed)."""
        ...

    async def charge(self, count: int) -> None:
        """``count`` requests made beyond the ones taken, counted as just ended."""
        ...


class LocalBudget:
    """``Budget`` over one ``SlidingWindow`` in this process."""

    def __init__(
        self, limit: int, per: float = 60.0, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.window = SlidingWindow(limit, per)
        self._clock = clock

    @property
    def limit(self) -> int:
        return self.window.limit

    async def take(self, reserve: int) -> float:
        now = self._clock()
        wait = self.window.wait(now, reserve)
        if wait <= 0:
            self.window.spend(now)
        return wait

    async def done(self) -> None:
        self.window.done(self._clock())

    async def charge(self, count: int) -> None:
        now = self._clock()
        for _ in range(count):
            self.window.spend(now)
            self.window.done(now)


class FallbackBudget:
    """A shared ``Budget`` (Redis), and this process's own share of it while the shared one
    cannot be reached: then each replica keeps to ``limit`` itself, as before it was shared."""

    def __init__(self, shared: Budget, local: LocalBudget) -> None:
        self.shared = shared
        self.local = local
        self._granted_locally = 0
        self._down = False

    @property
    def limit(self) -> int:
        return self.shared.limit

    async def take(self, reserve: int) -> float:
        try:
            wait = await self.shared.take(reserve)
        except StoreUnavailable as exc:
            self._note_down(exc)
            wait = await self.local.take(reserve)
            if wait <= 0:
                self._granted_locally += 1
            return wait
        self._note_up()
        return wait

    async def done(self) -> None:
        if self._granted_locally:
            self._granted_locally -= 1
            await self.local.done()
            return
        with contextlib.suppress(StoreUnavailable):  # the entry expires by itself
            await self.shared.done()

    async def charge(self, count: int) -> None:
        try:
            await self.shared.charge(count)
        except StoreUnavailable:
            await self.local.charge(count)

    def _note_down(self, exc: StoreUnavailable) -> None:
        if not self._down:
            log.warning("the shared update budget is unavailable (%s); keeping to it locally", exc)
        self._down = True

    def _note_up(self) -> None:
        if self._down:
            log.warning("the shared update budget answers again")
        self._down = False


class CheckedBudget:
    """A shared ``Budget`` through the shared store's ``StoreHealth``: its failures count and
    are logged with the other stores', and while the store is presumed down ``take`` fails
    at once (``FallbackBudget`` then keeps to the local share) instead of waiting out
    another timeout."""

    def __init__(self, inner: Budget, health: StoreHealth) -> None:
        self.inner = inner
        self.health = health

    @property
    def limit(self) -> int:
        return self.inner.limit

    async def take(self, reserve: int) -> float:
        return await self.health.call(None, lambda: self.inner.take(reserve))

    async def done(self) -> None:
        await self.health.call(None, self.inner.done)

    async def charge(self, count: int) -> None:
        await self.health.call(None, lambda: self.inner.charge(count))


def per_minute(limit: int, shared: Budget | None = None) -> Budget:
    """At most ``limit`` requests in any minute: shared by every replica when ``shared``
    (Redis) is given, each replica keeping to it alone while Redis is away."""
    local = LocalBudget(max(1, limit), 60.0)
    return local if shared is None else FallbackBudget(shared, local)


@dataclass(slots=True)
class ChannelState:
    window: Window | None
    last_edit: float = -math.inf
    blocked_until: float = -math.inf
    waiting: int = 0
    in_flight: int = 0
    live_turn: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Live updates of different runs in the channel take turns (first come, first served)."""

    def idle(self, now: float, interval: float) -> bool:
        return (
            self.waiting == 0
            and self.in_flight == 0
            and now >= max(self.blocked_until, self.last_edit + interval)
            and (self.window is None or self.window.idle(now))
        )


@dataclass(slots=True)
class PacerStats:
    rate_limited: int = 0
    """429s heard of, from any channel."""
    edits: int = 0
    """Live-message edits the platform took (live updates and finals; metrics)."""
    waits: dict[str, int] = field(default_factory=lambda: {"final": 0, "first": 0, "live": 0})
    """Edits that could not go at once, by priority."""


class EditPacer:
    """Every channel's allowance in this process, and a budget they share (``shared``).

    ``channel_window``: ``(limit, per)`` of each channel's own bucket (Discord's), or None
    where a platform counts no per-channel bucket for edits (Slack's ``chat.update``)."""

    def __init__(
        self,
        live_interval: float,
        *,
        channel_window: tuple[int, float] | None = None,
        shared: Budget | None = None,
        in_flight: Callable[[], Awaitable[int]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if channel_window is not None and shared is not None:
            # (no platform has both; a shared grant would need giving back when the
            # channel's bucket changed during the await)
            raise ValueError("a pacer paces by channel buckets or by a shared budget, not both")
        self.live_interval = live_interval
        self.channel_window = channel_window
        self.shared = shared
        self._clock = clock
        self._channels: dict[str, ChannelState] = {}
        self._kept = 0
        """Channels still busy after the last sweep (``_forget_idle``)."""
        self._shared_blocked_until = -math.inf
        self.running = 0
        """Runs whose live message is following them (their finals are still to come)."""
        self.in_flight = in_flight
        """How many runs every process sharing ``shared`` has in flight (the run registry's
        count: the other replicas' and those a dead process left, whose finals come from
        whichever process finishes them). Asked before each live or first update takes from
        the shared budget, so that it keeps one edit for each of them, not only for this
        process's runs."""
        self.stats = PacerStats()

    @property
    def rate_limited(self) -> int:
        return self.stats.rate_limited

    @property
    def channels(self) -> int:
        """How many channels the pacer keeps a state for (idle ones are forgotten past a
        bound, at the next sweep)."""
        return len(self._channels)

    def tracks(self, channel: str) -> bool:
        return channel in self._channels

    def remaining(self, channel: str) -> int | None:
        """Writes left in ``channel``'s current window; None: no window is known for it."""
        state = self._channels.get(channel)
        return None if state is None or state.window is None else state.window.remaining

    def _state(self, channel: str) -> ChannelState:
        state = self._channels.get(channel)
        if state is None:
            window = Window(*self.channel_window) if self.channel_window else None
            state = self._channels[channel] = ChannelState(window)
        return state

    @contextlib.contextmanager
    def following(self) -> Iterator[None]:
        """A run is live: its final edit will come, so live updates keep budget for it."""
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1

    async def _shared_reserve(self, priority: Priority) -> int:
        if priority == "final" or self.shared is None:
            return 0
        going = self.running
        if self.in_flight is not None:  # every process's, counted now: a count kept from
            # the last heartbeat missed runs started since, and their finals went short
            going = max(going, await self.in_flight())
        return min(going, self.shared.limit)  # one final per run still going

    def _wait(self, state: ChannelState, priority: Priority, now: float) -> float:
        """Seconds until the channel lets an edit of ``priority`` go (the shared budget aside)."""
        wait = max(state.blocked_until, self._shared_blocked_until) - now
        if priority == "live":
            wait = max(wait, state.last_edit + self.live_interval - now)
        if wait > 0:
            return wait
        reserve = 0 if priority == "final" else CHANNEL_RESERVE
        if state.window is not None:
            return state.window.wait(now, reserve)
        return 0.0

    @contextlib.asynccontextmanager
    async def slot(self, channel: str, *, priority: Priority = "live") -> AsyncIterator[None]:
        """Wait until an edit of ``priority`` may go in ``channel``, spend it, and hold it while
        the edit is in flight."""
        state = self._state(channel)
        state.waiting += 1
        try:
            if priority == "live":
                async with state.live_turn:
                    await self._until_allowed(state, priority)
            else:
                await self._until_allowed(state, priority)
        finally:
            state.waiting -= 1
        state.in_flight += 1
        try:
            yield
        finally:
            state.in_flight -= 1
            if state.window is not None:
                state.window.in_flight -= 1
            if self.shared is not None:
                await self.shared.done()
            self._forget_idle()

    async def _until_allowed(self, state: ChannelState, priority: Priority) -> None:
        waited = False
        while True:
            wait = self._wait(state, priority, self._clock())
            if wait <= 0 and self.shared is not None:  # taken (and counted) when it is 0
                wait = await self.shared.take(await self._shared_reserve(priority))
            if wait <= 0:
                break
            waited = True
            await asyncio.sleep(wait)
        if waited:
            self.stats.waits[priority] += 1
        now = self._clock()  # no await since the channel's check: nobody spent it meanwhile
        if state.window is not None:
            state.window.spend(now)
            state.window.in_flight += 1
        state.last_edit = now

    def _forget_idle(self) -> None:
        """Drops idle channels once there are more than ``MAX_IDLE_CHANNELS`` and twice as
        many as the last sweep kept: a sweep costs one look at every channel, so with many
        busy channels it must not run on every edit (amortised O(1) per edit)."""
        if len(self._channels) <= max(MAX_IDLE_CHANNELS, 2 * self._kept):
            return
        now = self._clock()
        for key in [k for k, s in self._channels.items() if s.idle(now, self.live_interval)]:
            del self._channels[key]
        self._kept = len(self._channels)

    def observe(
        self,
        channel: str,
        *,
        limit: int,
        remaining: int,
        reset_after: float,
        bucket: str | None = None,
        scoped: bool = True,
    ) -> None:
        """A response's rate-limit headers for ``channel``'s bucket. ``scoped``: the request
        was one of our edits there; else (another write in the channel, such as a new message)
        it is believed unless the edits are known to count against a different bucket, and
        only in a channel the pacer already keeps: every edit, placeholder and note takes its
        slot first, so a channel it has no state for is one it paces nothing in (an answer's
        trace thread, a new one per run), and a state for it would be kept for nothing."""
        if not scoped and channel not in self._channels:
            return
        window = self._state(channel).window
        if window is None:
            return
        if not scoped and window.bucket is not None and bucket != window.bucket:
            return
        window.observe(
            self._clock(), limit=limit, remaining=remaining, reset_after=reset_after, bucket=bucket
        )

    def postpone(self, channel: str, seconds: float, *, shared: bool = False) -> None:
        until = self._clock() + seconds
        state = self._state(channel)
        state.blocked_until = max(state.blocked_until, until)
        if shared:
            self._shared_blocked_until = max(self._shared_blocked_until, until)

    def rate_limit_hit(self, channel: str, retry_after: float, *, shared: bool = False) -> None:
        """A 429: nothing more goes to ``channel`` (every channel, if ``shared``) for
        ``retry_after``; the channel's bucket is spent until then."""
        self.stats.rate_limited += 1
        self.postpone(channel, retry_after, shared=shared)
        window = self._state(channel).window
        if window is not None:
            window.exhaust(self._clock() + retry_after)

    async def charge(self, channel: str, requests: int = 1) -> None:
        """Count requests an edit's slot made beyond its first (a surface that retried a
        shortened payload, say): they spend the allowance now, without waiting."""
        now = self._clock()
        window = self._state(channel).window
        if window is not None:
            for _ in range(requests):
                window.spend(now)
        if self.shared is not None:
            await self.shared.charge(requests)
