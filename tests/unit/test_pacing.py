"""The edit pacer: each platform's allowance, spent by priority (finals first, live last)."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.pacing import (
    EditPacer,
    FallbackBudget,
    LocalBudget,
    Priority,
    SlidingWindow,
    Window,
)
from core.errors import StoreUnavailable
from tests.properties import property_settings

SOON = 0.15
"""A slot that goes 'at once' is granted within this (a loaded machine's scheduling)."""


# ---- the allowances alone (explicit times, no sleeping) ------------------------------------


def test_a_window_spends_its_limit_then_waits_for_its_reset() -> None:
    window = Window(5, 5.0)
    for _ in range(5):
        assert window.wait(10.0, reserve=0) == 0
        window.spend(10.0)
    assert window.wait(11.0, reserve=0) == 4.0  # the window began with its first request
    assert window.wait(15.0, reserve=0) == 0  # reset: the whole limit again


def test_live_updates_leave_the_last_edit_of_a_window_to_a_final() -> None:
    window = Window(5, 5.0)
    for _ in range(4):
        window.spend(0.0)
    assert window.wait(1.0, reserve=1) == 4.0  # a live update would take the last one
    assert window.wait(1.0, reserve=0) == 0  # a final may


def test_a_window_believes_the_headers_and_counts_its_own_requests_in_flight() -> None:
    window = Window(5, 5.0)
    window.spend(0.0)
    window.spend(0.0)
    window.in_flight = 2
    # the first answer: 4 left as Discord counted, but the second request may not be counted yet
    window.observe(0.1, limit=5, remaining=4, reset_after=4.9, bucket="abc")
    assert (window.remaining, window.bucket) == (3, "abc")
    assert window.reset_at == 0.1 + 4.9
    window.observe(0.2, limit=2, remaining=0, reset_after=1.0, bucket=None)  # a smaller bucket
    assert window.limit == 2 and window.wait(0.3, reserve=0) == pytest.approx(0.9)
    assert window.bucket == "abc"


def test_a_sliding_window_never_holds_more_than_its_limit_in_any_period() -> None:
    window = SlidingWindow(3, per=60.0)
    for at in (0.0, 10.0, 20.0):
        assert window.wait(at, reserve=0) == 0
        window.spend(at)
        window.done(at)
    assert window.wait(30.0, reserve=0) == 30.0  # until the first one is a minute old
    assert window.wait(60.0, reserve=0) == 0
    assert window.wait(60.0, reserve=1) == 10.0  # keeping one back: the second must expire too
    assert window.used(100.0) == 0 and window.idle(100.0)


def test_a_request_counts_from_its_sending_until_a_period_after_its_answer() -> None:
    """The platform received it somewhere in between: a slow answer must not let the next
    request in before the platform's window let this one go."""
    window = SlidingWindow(1, per=60.0)
    window.spend(0.0)
    assert window.wait(5.0, reserve=0) == 0.05  # in flight: ask again shortly
    window.done(2.0)  # answered two seconds later
    assert window.wait(60.0, reserve=0) == 2.0
    assert window.wait(62.0, reserve=0) == 0


def test_a_reserve_as_large_as_the_budget_holds_live_updates_until_runs_end() -> None:
    window = SlidingWindow(2, per=60.0)
    assert window.wait(0.0, reserve=2) == 1.0  # nothing to expire: ask again in a second
    assert window.wait(0.0, reserve=1) == 0


@property_settings(300)
@given(
    limit=st.integers(1, 8),
    per=st.floats(0.5, 10.0),
    gaps=st.lists(st.floats(0.0, 3.0), min_size=1, max_size=60),
    reserves=st.lists(st.integers(0, 3), min_size=1, max_size=60),
)
def test_a_sliding_window_granted_at_its_own_times_never_exceeds_its_limit(
    limit: int, per: float, gaps: list[float], reserves: list[int]
) -> None:
    """Asking at arbitrary times and waiting exactly as long as it says: every period of
    ``per`` seconds holds at most ``limit`` grants."""
    window = SlidingWindow(limit, per=per)
    now, granted = 0.0, []
    for gap, wanted in zip(gaps, itertools.cycle(reserves), strict=False):
        now += gap
        reserve = min(wanted, limit - 1)  # (a reserve of the whole budget waits for runs to end)
        while (wait := window.wait(now, reserve)) > 0:  # as the pacer does
            now += wait
        window.spend(now)
        window.done(now)
        granted.append(now)
    for i, start in enumerate(granted):
        inside = [t for t in granted[i:] if t < start + per - 1e-9]
        assert len(inside) <= limit


@property_settings(300)
@given(
    limit=st.integers(1, 8),
    gaps=st.lists(st.floats(0.0, 3.0), min_size=1, max_size=60),
    finals=st.lists(st.booleans(), min_size=1, max_size=60),
)
def test_a_window_granted_at_its_own_times_never_exceeds_discords_fixed_windows(
    limit: int, gaps: list[float], finals: list[bool]
) -> None:
    """Discord's bucket: a window opens with its first request and admits ``limit`` until it
    resets. Requests the Window grants never go past what such a bucket admits."""
    per = 5.0
    window = Window(limit, per)
    server_start, server_used = -float("inf"), 0
    now = 0.0
    for gap, final in zip(gaps, itertools.cycle(finals), strict=False):
        now += gap
        reserve = 0 if final else 1
        while (wait := window.wait(now, reserve)) > 0:  # as the pacer does
            now += wait
        window.spend(now)
        if now >= server_start + per:
            server_start, server_used = now, 0
        server_used += 1
        assert server_used <= limit


# ---- the pacer (real time, short figures) --------------------------------------------------


async def stamp(pacer: EditPacer, channel: str, priority: Priority, out: list[float]) -> None:
    async with pacer.slot(channel, priority=priority):
        out.append(time.monotonic())


async def test_a_burst_of_finals_in_one_channel_goes_at_once_up_to_the_bucket() -> None:
    pacer = EditPacer(1.0, channel_window=(3, 0.4))
    started, times = time.monotonic(), []
    await asyncio.gather(*(stamp(pacer, "c", "final", times) for _ in range(4)))
    first, last = sorted(times)[:3], sorted(times)[3]
    assert all(t - started < SOON for t in first)
    assert last - started >= 0.4 - 0.02  # the fourth waits for the bucket's reset


async def test_a_final_right_after_a_live_update_does_not_wait_for_the_spacing() -> None:
    pacer = EditPacer(0.5, channel_window=(5, 5.0))
    times: list[float] = []
    await stamp(pacer, "c", "live", times)
    await stamp(pacer, "c", "final", times)
    await stamp(pacer, "c", "live", times)
    assert times[1] - times[0] < SOON
    assert times[2] - times[1] >= 0.5 - 0.02  # live updates keep it, after any edit


async def test_live_updates_never_spend_the_edit_a_final_needs() -> None:
    pacer = EditPacer(0.0, channel_window=(3, 0.5))
    started, times = time.monotonic(), []
    await stamp(pacer, "c", "first", times)  # leaves one in reserve too
    await stamp(pacer, "c", "live", times)
    waiting = asyncio.ensure_future(stamp(pacer, "c", "live", times))
    await asyncio.sleep(0.1)
    assert len(times) == 2 and not waiting.done()  # one edit left: the final's
    await stamp(pacer, "c", "final", times)
    assert times[2] - started < 0.1 + SOON
    await waiting
    assert times[3] - started >= 0.5 - 0.02
    assert pacer.stats.waits["live"] == 1 and pacer.stats.waits["final"] == 0


async def test_a_429_in_the_middle_of_a_burst_holds_the_channel_for_its_retry_after() -> None:
    pacer = EditPacer(1.0, channel_window=(5, 5.0))
    times: list[float] = []
    await stamp(pacer, "c", "final", times)
    pacer.rate_limit_hit("c", 0.3)
    hit = time.monotonic()
    await asyncio.gather(stamp(pacer, "c", "final", times), stamp(pacer, "other", "final", times))
    assert min(times[1:]) - hit < SOON  # another channel is not held
    assert max(times[1:]) - hit >= 0.3 - 0.02
    assert pacer.rate_limited == 1


async def test_a_workspace_wide_429_holds_every_channel() -> None:
    pacer = EditPacer(0.0, shared=LocalBudget(100, 60.0))
    pacer.rate_limit_hit("c", 0.2, shared=True)
    hit, times = time.monotonic(), []
    await stamp(pacer, "elsewhere", "final", times)
    assert times[0] - hit >= 0.2 - 0.02


async def test_many_channels_at_once_each_get_their_final_without_waiting() -> None:
    pacer = EditPacer(1.0, channel_window=(5, 5.0))
    started, times = time.monotonic(), []
    await asyncio.gather(*(stamp(pacer, f"c{i}", "final", times) for i in range(300)))
    assert max(times) - started < 1.0  # (the waits below are the exact check)
    assert pacer.stats.waits == {"final": 0, "first": 0, "live": 0}


async def test_live_updates_leave_part_of_a_shared_budget_to_the_runs_still_going() -> None:
    pacer = EditPacer(0.0, shared=LocalBudget(4, per=0.6))
    times: list[float] = []
    with pacer.following(), pacer.following():  # two runs live: keep two for their finals
        await asyncio.gather(*(stamp(pacer, f"c{i}", "first", times) for i in range(2)))
        blocked = asyncio.ensure_future(stamp(pacer, "c9", "live", times))
        await asyncio.sleep(0.1)
        assert len(times) == 2 and not blocked.done()
        await asyncio.gather(*(stamp(pacer, f"c{i}", "final", times) for i in range(2)))
        assert len(times) == 4  # both finals went at once
        await blocked


async def test_a_shared_budget_keeps_the_finals_of_every_replicas_runs_and_the_orphans() -> None:
    # Two replicas on one budget (Redis, as one LocalBudget here): each has one run, and a
    # third replica died leaving one; the registry counts all three.
    budget = LocalBudget(6, per=60.0)

    async def registry() -> int:  # the run registry's count, as every replica sees it
        return 3

    here = EditPacer(0.0, shared=budget, in_flight=registry)
    there = EditPacer(0.0, shared=budget, in_flight=registry)
    live: list[float] = []
    with here.following():
        updates = [asyncio.ensure_future(stamp(here, f"c{i}", "live", live)) for i in range(6)]
        await asyncio.sleep(0.1)
        # Counting only its own run, it would have spent five and left one final.
        assert len(live) == 3
        finals: list[float] = []
        started = time.monotonic()
        await asyncio.gather(
            stamp(here, "c0", "final", finals),  # its own run's
            stamp(there, "d0", "final", finals),  # the other replica's
            stamp(there, "orphan", "final", finals),  # the dead one's, finished by a replica
        )
        assert len(finals) == 3 and max(finals) - started < SOON
    for update in updates:
        update.cancel()
    await asyncio.gather(*updates, return_exceptions=True)


async def test_live_updates_of_two_runs_in_one_channel_take_turns() -> None:
    pacer = EditPacer(0.05)
    order: list[str] = []

    async def run(name: str) -> None:
        for _ in range(4):
            async with pacer.slot("c", priority="live"):
                order.append(name)

    await asyncio.gather(run("a"), run("b"))
    # while both wait, they alternate: neither gets two turns while the other is waiting
    assert order.count("a") == order.count("b") == 4
    assert all(x != y for x, y in itertools.pairwise(order[1:-1]))


async def test_idle_channels_are_forgotten_beyond_a_bound() -> None:
    now = [0.0]
    pacer = EditPacer(0.0, channel_window=(5, 1.0), clock=lambda: now[0])
    for i in range(1500):  # all still in their windows: none may be forgotten yet
        async with pacer.slot(f"c{i}", priority="final"):
            pass
    assert pacer.channels == 1500
    now[0] += 2.0  # every window is over
    for i in range(600):
        async with pacer.slot(f"d{i}", priority="final"):
            pass
    assert not pacer.tracks("c0"), "the idle ones went at the next sweep"
    assert pacer.channels <= 1025


async def test_writes_in_channels_it_paces_nothing_in_keep_no_state() -> None:
    """Each answer's trace thread is a new channel written in, never edited in: the headers of
    those writes (issue 46) made a channel state per run, kept until the idle bound."""
    pacer = EditPacer(0.0, channel_window=(5, 5.0))
    for n in range(500):
        pacer.observe(f"thread{n}", limit=5, remaining=4, reset_after=5.0, scoped=False)
    assert pacer.channels == 0

    async with pacer.slot("channel", priority="first"):  # the placeholder: the channel is paced
        pass
    pacer.observe("channel", limit=5, remaining=1, reset_after=5.0, bucket="b", scoped=False)
    assert pacer.remaining("channel") == 1, "a paced channel still learns from any write there"


# ---- found in review --------------------------------------------------------------------------


def test_a_refilled_window_counts_the_requests_still_in_flight() -> None:
    """One sent just before the reset may reach the platform after it: it counts there."""
    window = Window(5, 5.0)
    for _ in range(5):
        window.spend(0.0)
    window.in_flight = 2
    assert window.wait(5.0, reserve=0) == 0
    assert window.remaining == 3


def test_answers_about_one_window_arriving_out_of_order_never_raise_the_count() -> None:
    window = Window(5, 5.0)
    window.spend(0.0)
    window.spend(0.0)
    window.in_flight = 1
    window.observe(0.1, limit=5, remaining=3, reset_after=4.9, bucket="b")  # the second's
    window.observe(0.12, limit=5, remaining=4, reset_after=4.88, bucket="b")  # the first's
    assert window.remaining == 3
    window.observe(6.0, limit=5, remaining=4, reset_after=5.0, bucket="b")  # a new window
    assert window.remaining == 4


async def test_a_429_before_any_window_started_holds_for_its_retry_after_only() -> None:
    pacer = EditPacer(0.0, channel_window=(5, 5.0))
    pacer.rate_limit_hit("c", 0.2)
    hit, times = time.monotonic(), []
    async with asyncio.timeout(2):  # not a wait without end
        await stamp(pacer, "c", "final", times)
    assert 0.2 - 0.02 <= times[0] - hit < 1.0


async def test_requests_an_edit_made_beyond_its_slot_are_charged() -> None:
    pacer = EditPacer(0.0, channel_window=(5, 5.0))
    await pacer.charge("c", 3)
    assert pacer.remaining("c") == 2
    shared = LocalBudget(10, 60.0)
    await EditPacer(0.0, shared=shared).charge("c", 3)
    assert shared.window.used(time.monotonic()) == 3


def test_a_pacer_takes_channel_buckets_or_a_shared_budget_not_both() -> None:
    with pytest.raises(ValueError, match="not both"):
        EditPacer(0.0, channel_window=(5, 5.0), shared=LocalBudget(10))


async def test_a_local_budget_grants_its_limit_then_says_how_long_to_wait() -> None:
    now = [100.0]
    budget = LocalBudget(2, per=60.0, clock=lambda: now[0])
    assert await budget.take(0) == 0 and await budget.take(0) == 0
    await budget.done()
    await budget.done()
    assert await budget.take(0) == pytest.approx(60.0)
    now[0] += 60.0
    assert await budget.take(1) == 0  # one left over the reserve
    assert await budget.take(1) > 0


class DownBudget:
    """A shared budget whose store is unreachable until ``up`` is set."""

    def __init__(self) -> None:
        self.up = False
        self.taken = 0
        self.finished = 0

    @property
    def limit(self) -> int:
        return 3

    async def take(self, reserve: int) -> float:
        if not self.up:
            raise StoreUnavailable("redis: connection refused")
        self.taken += 1
        return 0.0

    async def done(self) -> None:
        if not self.up:
            raise StoreUnavailable("redis: connection refused")
        self.finished += 1

    async def charge(self, count: int) -> None:
        raise StoreUnavailable("redis: connection refused")


async def test_without_its_store_a_shared_budget_keeps_to_its_limit_locally(
    caplog: pytest.LogCaptureFixture,
) -> None:
    shared = DownBudget()
    budget = FallbackBudget(shared, LocalBudget(3, per=60.0))
    assert [await budget.take(0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert await budget.take(0) > 0  # this replica's own share is spent
    await budget.charge(1)  # counted locally, not lost
    assert budget.local.window.used(time.monotonic()) == 4
    unavailable = [r for r in caplog.records if "unavailable" in r.getMessage()]
    assert len(unavailable) == 1  # said once, not per request
    shared.up = True
    assert await budget.take(0) == 0.0 and shared.taken == 1
    assert any("answers again" in r.getMessage() for r in caplog.records)
    for _ in range(4):  # the three local grants end locally, the shared one in the store
        await budget.done()
    assert shared.finished == 1


async def test_idle_channels_are_forgotten_and_a_sweep_is_not_paid_on_every_edit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import adapters.pacing as pacing

    looked = 0
    idle = pacing.ChannelState.idle

    def counted(self: pacing.ChannelState, now: float, interval: float) -> bool:
        nonlocal looked
        looked += 1
        return idle(self, now, interval)

    monkeypatch.setattr(pacing.ChannelState, "idle", counted)
    pacer = EditPacer(0.0)
    busy = [f"busy{i}" for i in range(pacing.MAX_IDLE_CHANNELS + 200)]
    held = asyncio.Event()
    entered = 0

    async def hold(channel: str) -> None:
        nonlocal entered
        async with pacer.slot(channel, priority="final"):
            entered += 1
            await held.wait()

    holders = [asyncio.ensure_future(hold(c)) for c in busy]
    while entered < len(busy):  # noqa: ASYNC110 - waits for every slot to be entered
        await asyncio.sleep(0.01)
    for n in range(3000):  # edits in other channels while all those stay busy
        async with pacer.slot(f"quick{n}", priority="final"):
            pass
    assert looked < 3000 * 10, "a sweep over ~1,200 busy channels is not paid per edit"
    assert len(pacer._channels) <= 2 * (len(busy) + 1)
    held.set()
    await asyncio.gather(*holders)
    for n in range(3000):
        async with pacer.slot(f"later{n}", priority="final"):
            pass
    assert len(pacer._channels) <= 2 * len(busy) + 2, "idle ones were dropped"
