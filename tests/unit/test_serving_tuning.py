"""What keeps one process's event loop responsive at 1,000 conversations (``bench/soak.py``):
the heap settled after start-up, and discord.py's scan for idle rate-limit buckets bounded."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from discord.http import HTTPClient

from adapters.discord.client import BUCKET_SWEEP_SECONDS, BucketSweep


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


async def test_idle_rate_limit_buckets_still_go_but_are_scanned_at_most_every_interval() -> None:
    http = HTTPClient(asyncio.get_running_loop())
    scan = http._try_clear_expired_ratelimits
    assert BucketSweep.install(http)  # this discord.py still has the scan we bound
    assert isinstance(http._try_clear_expired_ratelimits, BucketSweep)
    now = [1000.0]
    http._try_clear_expired_ratelimits = BucketSweep(scan, lambda: now[0])  # type: ignore[method-assign]
    for n in range(300):  # past 256 buckets discord.py scans on every new one
        http.get_ratelimit(f"channel:{n}")
    for bucket in http._buckets.values():
        bucket._last_request -= 301  # idle for more than discord.py's 5 minutes
    http.get_ratelimit("thread:1")
    assert len(http._buckets) == 301  # the last scan was moments ago (at the 256th)

    now[0] += BUCKET_SWEEP_SECONDS
    http.get_ratelimit("thread:2")
    assert set(http._buckets) == {"thread:1", "thread:2"}  # the idle ones are gone
