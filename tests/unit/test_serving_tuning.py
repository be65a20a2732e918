"""What keeps one process's event loop responsive at 1,000 conversations (``bench/soak.py``):
the heap settled after start-up, and discord.py's scan for idle rate-limit buckets bounded;
and its memory from growing with the runs it has answered (issue 46): the oldest generation
collected while serving."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import weakref

from discord.http import HTTPClient

from adapters.discord.client import BUCKET_IDLE_SECONDS, BucketSweep
from bot.serve import OldGeneration, collecting_old_garbage


def test_serving_freezes_the_start_up_heap_and_collects_young_objects_less_often() -> None:
    code = (
        "import gc, json\n"
        "from bot.serve import GC_THRESHOLDS, settle_heap\n"
        "before = gc.get_threshold()\n"
        "settle_heap()\n"
        "print(json.dumps([before, gc.get_threshold(), list(GC_THRESHOLDS),"
        " gc.get_freeze_count()]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after, wanted, frozen = json.loads(out.stdout)
    assert after[:2] == wanted and after[0] > before[0]
    assert after[2] == before[2]  # the oldest generation keeps CPython's setting
    assert frozen > 10_000  # the modules and the app, out of every later collection


async def test_idle_buckets_whose_window_reset_go_within_a_sweep_and_no_scan_per_bucket() -> None:
    loop = asyncio.get_running_loop()
    http = HTTPClient(loop)
    assert BucketSweep.install(http)  # this discord.py still has what the sweep relies on
    assert isinstance(http._try_clear_expired_ratelimits, BucketSweep)
    http.get_ratelimit("first")  # the first new bucket sweeps (nothing idle yet)

    for n in range(300):
        http.get_ratelimit(f"thread:{n}")
    busy, waiting, limited = (http.get_ratelimit(k) for k in ("busy", "waiting", "limited"))
    for bucket in http._buckets.values():
        bucket._last_request -= BUCKET_IDLE_SECONDS  # unused that long
    busy.outgoing = 1  # a request in flight
    waiting._pending_requests.append(loop.create_future())
    limited.expires = loop.time() + 5  # its window has not reset: discord.py must keep waiting
    http.get_ratelimit("new:1")
    assert len(http._buckets) == 305  # the last sweep was moments ago: nothing scanned

    # A sweep whose interval is up: the idle buckets go, the others and the new ones stay.
    http._try_clear_expired_ratelimits = BucketSweep(http, loop.time)  # type: ignore[method-assign]
    http.get_ratelimit("new:2")
    assert set(http._buckets) == {"busy", "waiting", "limited", "new:1", "new:2"}


def _garbage_in_the_oldest_generation() -> weakref.ref[object]:
    """A cycle that was alive at a middle collection (so it moved to the oldest generation)
    and has ended since: what an ended run leaves."""

    class Node:
        pass

    node = Node()
    node.me = node  # type: ignore[attr-defined]
    gc.collect(1)  # still referenced: it moves up to the oldest generation
    return weakref.ref(node)


def test_the_oldest_generation_is_collected_once_cpython_has_not_for_a_while() -> None:
    now = [0.0]
    keeper = OldGeneration(15.0, clock=lambda: now[0])
    gc.disable()  # no collection of CPython's own in between
    try:
        with keeper.listening():
            gone = _garbage_in_the_oldest_generation()
            now[0] += 14.0
            assert not keeper.tick() and gone() is not None, "not yet: it waits for the cycle"
            now[0] += 1.0
            assert keeper.tick() and gone() is None
            assert keeper.collections == 1
    finally:
        gc.enable()


def test_a_full_collection_cpython_makes_itself_puts_the_next_one_off() -> None:
    now = [0.0]
    keeper = OldGeneration(15.0, clock=lambda: now[0])
    with keeper.listening():
        now[0] += 10.0
        gc.collect()  # CPython's own, heard through gc.callbacks
        now[0] += 10.0
        assert not keeper.tick()
        now[0] += 5.0
        assert keeper.tick()
    assert keeper._heard not in gc.callbacks


async def test_serving_runs_the_collection_of_the_oldest_generation_until_it_ends() -> None:
    async with collecting_old_garbage(every=3600):
        named = [t for t in asyncio.all_tasks() if t.get_name() == "the oldest generation"]
        assert len(named) == 1
        await asyncio.sleep(0)  # it starts listening
    await asyncio.sleep(0)
    assert named[0].cancelled()


def test_a_long_collection_spaces_the_next_out_to_its_share_of_the_time() -> None:
    """At 250 conversations one took 370 ms: the loop is not held more than 1% of the time."""
    now = [0.0]

    def collect() -> None:
        now[0] += 1.0  # a collection that held the process a second

    keeper = OldGeneration(15.0, share=0.01, clock=lambda: now[0], collect=collect)
    now[0] += 15.0
    assert keeper.tick() and keeper.took == 1.0
    now[0] += 99.0
    assert not keeper.tick()
    now[0] += 1.0
    assert keeper.tick() and keeper.collections == 2
