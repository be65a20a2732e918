"""What keeps one process's event loop responsive at 1,000 conversations (``bench/soak.py``):
the heap settled after start-up, and discord.py's scan for idle rate-limit buckets bounded."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from discord.http import HTTPClient

from adapters.discord.client import BUCKET_IDLE_SECONDS, BucketSweep


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
