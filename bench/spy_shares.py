"""Where a soaking bot's CPU goes, from a py-spy profile: our code versus libraries versus
the event loop, and the share of each fixed per-second timer (issue 46).

    scripts/with-redis .venv/bin/python -m bench.soak --platform slack --conversations 80 \\
        --minutes 1 --reply realistic &
    sleep 25; py-spy record --pid $! --rate 100 --duration 30 --nonblocking --format raw -o p.raw
    .venv/bin/python -m bench.spy_shares p.raw [more.raw ...]

Each sample is counted once, for the frame it was in (its leaf): ``our code`` is
``core/``, ``adapters/`` and ``bot/``; the event loop is ``asyncio`` and ``selectors``, split
into socket writes (a send on loopback does the receiver's TCP work too), socket reads and
the loop's own bookkeeping. A sample waiting in ``select`` is idle, not work, and is left
out (py-spy's ``--nonblocking`` cannot always tell). Then, inclusive (a sample counts for
every named part on its stack): Redis, the crash-recovery heartbeats and sweep, the loop-lag
probe, the pacer, the live message, the model's stream.
"""

from __future__ import annotations

import re
import sys
from collections import Counter

LIBRARIES = {
    "aiohttp (+yarl, multidict)": ("aiohttp", "yarl", "multidict", "aiosignal", "propcache"),
    "redis-py": ("redis",),
    "platform SDK (slack_sdk, slack_bolt, discord.py)": ("slack_sdk", "slack_bolt", "discord"),
    "openai, httpx2, pydantic": ("openai", "httpx2", "httpx", "pydantic", "pydantic_core", "anyio"),
}
INCLUSIVE = {
    "Redis (core/stores/redis and redis-py)": r"core/stores/redis/|\(redis/",
    "  of it, on_time (core/looplag.py)": r"on_time \(core/looplag|_OnTime\.",
    "crash-recovery heartbeats (Recovery._keeping)": r"Recovery\._keeping",
    "orphan sweep (Recovery._loop)": r"Recovery\._loop",
    "loop-lag probe (LoopLag._tick)": r"LoopLag\._tick",
    "pacer (adapters/pacing.py)": r"adapters/pacing\.py",
    "live message (adapters/live.py)": r"adapters/live\.py",
    "model stream (OpenAIChatModel.stream)": r"OpenAIChatModel\.stream",
}
_FILE = re.compile(r"\((.*?):\d+\)$")


def owner(frame: str) -> str:
    found = _FILE.search(frame)
    path = found.group(1) if found else frame
    if path.startswith(("core/", "adapters/", "bot/")):
        return "our code (core/, adapters/, bot/)"
    if path.startswith("asyncio/"):
        if "selector_events.py" in path and "write" in frame.split(" ", 1)[0].lower():
            return "event loop: socket writes"
        if "_read_ready" in frame:
            return "event loop: socket reads"
        return "event loop: callbacks, timers, tasks"
    top = path.split("/", 1)[0]
    for name, packages in LIBRARIES.items():
        if top in packages:
            return name
    return "standard library and other (json, contextlib, dataclasses, ...)"


def shares(path: str) -> tuple[int, Counter[str], Counter[str]]:
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    with open(path) as raw:
        for line in raw:
            stack, _, count = line.rstrip().rpartition(" ")
            if not stack:
                continue
            frames = stack.split(";")
            if "EpollSelector.select" in frames[-1] or "select (selectors.py" in frames[-1]:
                continue  # waiting for the next event: idle
            n = int(count)
            total += n
            own[owner(frames[-1])] += n
            for name, pattern in INCLUSIVE.items():
                if re.search(pattern, stack):
                    inclusive[name] += n
    return total, own, inclusive


def main(paths: list[str]) -> None:
    for path in paths:
        total, own, inclusive = shares(path)
        print(f"== {path}: {total} busy samples; by the frame each was in")
        for name, n in own.most_common():
            print(f"{n / max(1, total):6.1%}  {name}")
        print("== inclusive")
        for name in INCLUSIVE:
            print(f"{inclusive[name] / max(1, total):6.1%}  {name}")


if __name__ == "__main__":
    main(sys.argv[1:])
