"""The loop's lag probe, waits that do not count its lateness, and the process's room."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from adapters.room import Room
from core.looplag import LoopLag, on_time


def block(seconds: float) -> None:
    time.sleep(seconds)  # a late loop is the point


PUNCTUAL = 0.15
"""Lag below this counts as on time: half the 0.3 s block, so a busy machine's scheduling
delay is not taken for the block, nor the block for a delay."""


async def until_punctual(lag: LoopLag, *, within: float = 5.0) -> float:
    """The loop time at which ``lag`` says the loop is on time (bounded)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while lag.lag() >= PUNCTUAL:
        assert loop.time() - started < within, f"still late: {lag.lag()}"
        await asyncio.sleep(0.01)
    return loop.time()


async def until_admits(room: Room, *, within: float = 5.0) -> float:
    """The loop time at which ``room`` has room (bounded)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while room.full() is not None:
        assert loop.time() - started < within, f"still refused: {room.full()}"
        await asyncio.sleep(0.01)
    return loop.time()


async def test_the_probe_sees_a_blocked_loop_at_once_and_forgets_it_after_its_window() -> None:
    lag = LoopLag(interval=0.02, window=0.3)
    assert lag.lag() == 0.0, "nothing before start"
    lag.start()
    try:
        await asyncio.sleep(0.1)
        await until_punctual(lag)
        before = lag.samples
        block(0.3)
        ended = asyncio.get_running_loop().time()
        assert lag.lag() >= 0.25, "overdue right now, before its timer has even run"
        await asyncio.sleep(0.05)
        assert lag.samples > before, "the late sample is taken"
        assert lag.lag() >= 0.25, "the late sample, within the window"
        # Forgotten only once a whole window has passed since that sample (loop time: a late
        # loop cannot make it sooner), and then whatever the machine's speed.
        forgotten = await until_punctual(lag) - ended
        assert forgotten >= 0.3, "forgotten before its window"
        # and by the window, not by the bound on kept samples (60 of them: 1.2 s at least)
        assert forgotten < 1.0, "kept past its window"
        assert lag.samples >= 10
    finally:
        lag.stop()
    assert not lag.running


async def test_on_time_ends_a_wait_in_its_time_when_the_loop_is_punctual() -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        async with on_time(0.2):
            await asyncio.sleep(5)
    assert 0.18 <= time.monotonic() - started < 2.5  # not the 5 s sleep (loose: busy machines)


async def test_on_time_does_not_count_the_loop_s_lateness() -> None:
    async def blocker() -> None:
        for _ in range(6):
            await asyncio.sleep(0.01)
            block(0.2)

    blocking = asyncio.create_task(blocker())
    await asyncio.sleep(0)
    started = time.monotonic()
    async with on_time(0.3):  # asyncio.timeout(0.3) would expire in the first block
        await asyncio.sleep(0.9)
    assert time.monotonic() - started >= 0.9
    await blocking


async def test_a_reply_that_came_while_the_loop_was_late_is_not_timed_out() -> None:
    done: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def answer_then_block() -> None:
        await asyncio.sleep(0.01)
        asyncio.get_running_loop().call_later(0.02, done.set_result, "reply")
        block(0.5)  # the reply's timer and every tick are due when the loop comes back

    blocking = asyncio.create_task(answer_then_block())
    async with on_time(0.05, tick=0.05):
        assert await done == "reply"
    await blocking


async def test_the_room_is_shared_and_refuses_past_its_runs_or_a_late_loop() -> None:
    lag = LoopLag(interval=0.02, window=0.2)
    room = Room(2, lag=lag, max_lag=0.1)
    room.start()
    try:
        await asyncio.sleep(0.05)
        await until_admits(room)
        assert room.take() is None and room.take() is None
        assert room.take() == "capacity"
        room.give_back()
        block(0.15)
        ended = asyncio.get_running_loop().time()
        assert room.take() == "overloaded"
        admits = await until_admits(room) - ended
        assert 0.2 <= admits < 0.7, "admits again once its window is clear, not before"
        assert room.take() is None
        assert room.taken == 2
    finally:
        room.stop()
    assert Room(1, lag=LoopLag(), max_lag=0).full() is None, "0 turns the lag check off"


async def test_every_wait_is_counted_by_one_timer_that_stops_when_none_is_open() -> None:
    from core.looplag import _TICKS, TICK

    loop = asyncio.get_running_loop()
    timers_before = len(loop._scheduled)  # type: ignore[attr-defined]

    async def wait(seconds: float) -> float:
        started = time.monotonic()
        with contextlib.suppress(TimeoutError):
            async with on_time(seconds):
                await asyncio.sleep(5)
        return time.monotonic() - started

    waits = [asyncio.create_task(wait(0.2)) for _ in range(50)]
    await asyncio.sleep(0.02)
    ticks = _TICKS[loop][TICK]
    assert len(ticks.waits) == 50
    # 50 sleeps and one tick: no timer per wait
    assert len(loop._scheduled) - timers_before == 51  # type: ignore[attr-defined]
    took = await asyncio.gather(*waits)
    assert all(0.2 <= t < 0.4 for t in took), took
    assert not ticks.waits
    await asyncio.sleep(TICK * 2)
    assert ticks.handle is None, "an idle loop keeps no tick going"
