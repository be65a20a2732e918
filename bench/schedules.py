"""Schedules soak (issue 44): N scheduler processes on one Redis, many one-minute schedules,
one process killed with SIGKILL now and then (and replaced at once).

    scripts/with-redis .venv/bin/python -m bench.schedules [--processes 4] [--schedules 500]
        [--minutes 10] [--kill-every 2] [--minute-seconds 60] [--seed N]

Each child is a process as ``serve`` will run it: its own Redis client, the Redis schedule
store and the platform events' claims (``RedisEventClaims``), and a ``Scheduler`` looking
every 5 s plus up to 2 s of jitter. Its Runner records each occurrence it is given in a Redis
list (who ran which planned minute, and when) and answers ok, so this measures the
scheduling itself, not a model or a platform (the posting runner, ``adapters.scheduled``, is
tested end to end in tests/integration/test_schedules_serve.py).

``--minute-seconds`` scales time for a short smoke run: a schedule minute lasts that many real
seconds, and the looks, the jitter and the kills scale with it (the lateness is printed in
schedule seconds and in real ones). The issue's run is the default: 4 processes, 500
schedules, 10 minutes, a kill every 2 minutes, each at a random moment of the first 6 seconds
of its minute, when that minute's claims are in flight.

It prints the occurrences expected, run, run twice (duplicates) and never run (missed),
those marked late, lateness p50 / p99 / max, the kills, and the machine's load before and
after. The bench's keys (its own prefix) are deleted at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass

from bench.soak import percentile
from core.scheduler import Occurrence, Scheduler
from core.schedules import Added, Outcome, Place, Schedule, ScheduleBook, ScheduleSettings
from core.stores.redis import RedisEventClaims, create_client
from core.stores.redis.schedules import RedisSchedules

LOOK_EVERY = 5.0
JITTER = 2.0
KILL_AFTER_MINUTE = 0.0
"""Schedule seconds after a minute starts when a kill is aimed (plus up to KILL_SPREAD):
the first looks of a minute come within its first seconds, their claims in flight."""
KILL_SPREAD = 6.0
SETTINGS = ScheduleSettings(
    default_timezone="UTC", min_interval_seconds=60, max_per_channel=10_000, max_per_user=10_000
)


@dataclass(frozen=True)
class Timeline:
    """Schedule time from wall time: ``start`` (a minute boundary, schedule time) at the wall
    instant ``wall``, ``scale`` schedule seconds per real second."""

    start: float
    wall: float
    scale: float

    def now(self) -> float:
        return self.start + (time.time() - self.wall) * self.scale

    def real(self, schedule_seconds: float) -> float:
        return schedule_seconds / self.scale


class Recorder:
    """The children's Runner: RPUSH what ran, answer ok."""

    def __init__(self, client: object, key: str, clock: Timeline) -> None:
        self._client = client
        self._key = key
        self._clock = clock

    async def run(self, occurrence: Occurrence) -> Outcome:
        record = {
            "schedule": occurrence.schedule.id,
            "planned": occurrence.planned,
            "started": occurrence.started,
            "late": occurrence.late,
            "pid": os.getpid(),
        }
        await self._client.rpush(self._key, json.dumps(record))  # type: ignore[attr-defined]
        return "ok"

    async def paused(self, schedule: Schedule) -> None:
        print(f"paused: {schedule.id}", file=sys.stderr)


async def child(url: str, prefix: str, timeline: Timeline) -> None:
    client = create_client(url, timeout=5.0)
    book = ScheduleBook(RedisSchedules(client, prefix=prefix), SETTINGS)
    claims = RedisEventClaims(client, prefix=prefix, ttl_seconds=900)
    recorder = Recorder(client, f"{prefix}bench:ran", timeline)
    scheduler = Scheduler(
        book=book,
        claims=claims,
        runner=recorder,
        notice=recorder,
        clock=timeline.now,
        every=timeline.real(LOOK_EVERY),
        jitter=timeline.real(JITTER),
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    looking = asyncio.create_task(scheduler.forever())
    await stop.wait()
    looking.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await looking
    await scheduler.settled()
    await client.aclose()


def spawn(url: str, prefix: str, timeline: Timeline) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "bench.schedules", "--child", url, prefix]
    argv += [repr(timeline.start), repr(timeline.wall), repr(timeline.scale)]
    return subprocess.Popen(argv)


async def add_schedules(url: str, prefix: str, count: int, at: float) -> list[str]:
    client = create_client(url, timeout=5.0)
    book = ScheduleBook(RedisSchedules(client, prefix=prefix), SETTINGS)
    ids = []
    try:
        for i in range(count):
            added = await book.add(
                owner=f"bench:user{i % 50}",
                owner_name=f"user{i % 50}",
                place=Place("slack", f"C{i % 100}", space="T1"),
                when_text="* * * * *",
                question=f"question {i}",
                admin=True,
                now=at,
            )
            assert isinstance(added, Added), added
            ids.append(added.schedule.id)
    finally:
        await client.aclose()
    return ids


async def collect(url: str, prefix: str) -> list[dict[str, object]]:
    client = create_client(url, timeout=5.0)
    try:
        raws = await client.lrange(f"{prefix}bench:ran", 0, -1)
        keys = [k async for k in client.scan_iter(match=prefix + "*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()
    return [json.loads(raw) for raw in raws]


async def soak(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    prefix = f"bench-schedules:{uuid.uuid4().hex[:8]}:"
    scale = 60.0 / args.minute_seconds
    wall = time.time()
    start = (int(wall) // 60 + 2) * 60.0  # a minute boundary (schedule time) ahead of wall time
    timeline = Timeline(start=start, wall=wall, scale=scale)
    load_before = os.getloadavg()
    ids = await add_schedules(args.redis_url, prefix, args.schedules, at=start)
    children = [spawn(args.redis_url, prefix, timeline) for _ in range(args.processes)]
    end = start + args.minutes * 60 + 30  # the last minute gets its looks
    kills = []
    next_kill = start + args.kill_every * 60
    try:
        while (now := timeline.now()) < end:
            aim = next_kill + KILL_AFTER_MINUTE + rng.uniform(0, KILL_SPREAD)
            if args.kill_every > 0 and now >= aim and next_kill < end - 60:
                victim = rng.randrange(len(children))
                children[victim].send_signal(signal.SIGKILL)
                children[victim].wait()
                children[victim] = spawn(args.redis_url, prefix, timeline)
                kills.append(now - next_kill)
                next_kill += args.kill_every * 60
            await asyncio.sleep(min(0.2, timeline.real(1.0)))
    finally:
        for process in children:
            process.send_signal(signal.SIGTERM)
        for process in children:
            process.wait()
    ran = await collect(args.redis_url, prefix)
    report(args, ids, ran, start, kills, load_before, timeline)
    return 0


def report(
    args: argparse.Namespace,
    ids: list[str],
    ran: list[dict[str, object]],
    start: float,
    kills: list[float],
    load_before: tuple[float, float, float],
    timeline: Timeline,
) -> None:
    minutes = [start + 60 * m for m in range(1, args.minutes + 1)]
    expected = {(sid, int(m)) for sid in ids for m in minutes}
    seen = Counter((str(r["schedule"]), int(str(r["planned"]))) for r in ran)
    duplicates = sum(n - 1 for n in seen.values() if n > 1)
    missed = len(expected - set(seen))
    lateness = [float(str(r["started"])) - float(str(r["planned"])) for r in ran]
    late = sum(bool(r["late"]) for r in ran)
    load_after = os.getloadavg()
    print(
        f"schedules soak: {args.processes} processes, {args.schedules} one-minute schedules, "
        f"{args.minutes} minutes, a SIGKILL every {args.kill_every} minutes "
        f"(minute = {args.minute_seconds:g} s real)"
    )
    print(f"occurrences expected: {len(expected)}, run: {len(seen)} (records {len(ran)})")
    print(f"duplicates: {duplicates}")
    print(f"missed: {missed}")
    print(f"marked late: {late}")
    for name, scale in (("schedule s", 1.0), ("real s", 1 / timeline.scale)):
        p50, p99 = percentile(lateness, 0.5) * scale, percentile(lateness, 0.99) * scale
        worst = max(lateness, default=float("nan")) * scale
        print(f"lateness ({name}): p50 {p50:.2f}, p99 {p99:.2f}, max {worst:.2f}")
    shown = ", ".join(f"+{k:.1f} s" for k in kills) or "none"
    print(f"kills (schedule seconds after their minute began): {shown}")
    cores = os.cpu_count()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in load_before)} ({cores} cores)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in load_after)}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        url, prefix, start, wall, scale = sys.argv[2:7]
        timeline = Timeline(float(start), float(wall), float(scale))
        asyncio.run(child(url, prefix, timeline))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--schedules", type=int, default=500)
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--kill-every", type=float, default=2.0, help="minutes (0: never)")
    parser.add_argument("--minute-seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    raise SystemExit(asyncio.run(soak(parser.parse_args())))


if __name__ == "__main__":
    main()
