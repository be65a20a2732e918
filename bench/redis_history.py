"""Redis memory per conversation, over every key a conversation writes, after realistic turns.

Run: ``scripts/with-redis .venv/bin/python bench/redis_history.py [--turns 20]
[--max-traces N]`` (``redis.max_traces``: with fewer than ``--turns``, the oldest traces go).

Each turn goes through the real ``Agent`` on the Redis ``Stores`` bundle (history, trace,
trace indexes, lock, allowances) with what the answering pipeline writes beside it per
question (the event claim, the cooldown, the run slot, the day's token counters, the channel's
settings read). A turn is realistic: a scripted model streams three tool steps (a web search
of ~2.5 KB of results, a knowledge-base lookup of ~1.5 KB, a calculation) and then an answer
of 600-1,000 characters, with token usage, in ~5-character chunks. Memory is ``MEMORY USAGE``
of every key under the bench's own prefix (the shared ``recent-traces`` index included),
printed per kind of key, with the machine's load. Keys are deleted at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
import uuid
from collections import defaultdict
from pathlib import Path

from core.agent import Agent, AgentSettings
from core.llm import Usage
from core.scripted import ScriptedModel, Turn
from core.storage import Stores
from core.tools import FunctionTool, ToolRegistry

DOCS = Path(__file__).resolve().parent.parent / "docs"
TEXT = " ".join(" ".join(p.read_text().split()) for p in sorted(DOCS.glob("*.md")))
"""Real English (the project's own documentation) to cut model text and tool results from,
so they compress as real prose does, not as a repeated sentence would."""


def prose(rng: random.Random, chars: int) -> str:
    start = rng.randrange(0, len(TEXT) - chars)
    return TEXT[start : start + chars]


def search_results(rng: random.Random, query: str) -> str:
    lines = []
    for n in range(5):
        lines.append(
            f"[{n + 1}] {prose(rng, 60)} - https://example{n}.org/{uuid.uuid4().hex[:10]}\n"
            f"{prose(rng, 420)}"
        )
    return f"Results for {query}:\n" + "\n\n".join(lines)


def turns_for(rng: random.Random, i: int) -> list[Turn]:
    usage = Usage(1800 + 400 * i, 180)
    steps = [
        ("search", f"moon distance light time {i}"),
        ("lookup", "lunar ranging"),
        ("calculate", "384400/299792.458"),
    ]
    script = [
        Turn(
            f"Thought: {prose(rng, 140)}\nAction: {tool}[{arg}]",
            chunk_size=5,
            usage=usage,
        )
        for tool, arg in steps
    ]
    answer = prose(rng, rng.randint(600, 1000))
    script.append(Turn(f"Thought: {prose(rng, 80)}\nFinal Answer: {answer}", 5, usage))
    return script


def tools(rng: random.Random) -> ToolRegistry:
    async def search(q: str) -> str:
        return search_results(rng, q)

    async def lookup(q: str) -> str:
        return f"From operations.md:\n{prose(rng, 1500)}"

    async def calculate(q: str) -> str:
        return "1.2822"

    registry = ToolRegistry()
    for name, func in (("search", search), ("lookup", lookup), ("calculate", calculate)):
        registry.add(FunctionTool(name, func, description=name, example=f"{name}[x]"))
    return registry


def kind_of(key: str, prefix: str) -> str:
    rest = key.removeprefix(prefix)
    return rest.split(":", 1)[0]


async def main(turn_count: int, max_traces: int = 0) -> None:
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    prefix = f"reactbot-bench:{uuid.uuid4().hex[:8]}:"
    stores = Stores.redis(url, prefix=prefix, max_traces=max_traces)
    assert stores.shared is not None
    client = stores.shared.client
    rng = random.Random(25)
    conversation, user, channel = "slack:T1:C1:1.0", "U1", "slack:T1:C1"
    script = [t for i in range(turn_count) for t in turns_for(rng, i)]
    model = ScriptedModel(script)
    agent = Agent(model, tools(rng), stores=stores, settings=AgentSettings(deadline=60))
    try:
        started = time.perf_counter()
        for i in range(turn_count):
            # What the pipeline writes beside the run, once per question.
            await stores.claims.claim(f"slack:Ev{i:06d}")
            await stores.cooldowns.hit(f"slack:{user}", 5.0)
            await stores.slots.take(f"slack:{user}", f"r{i}", limit=2, lease=240)
            await stores.channel_settings.get(channel)
            run = agent.start(
                f"How far is the Moon, and how long does light take? ({i})",
                conversation=conversation,
                user=user,
            )
            final = await run.wait()
            assert final.trace.status == "answered", final.trace.status
            await stores.slots.give_back(f"slack:{user}", f"r{i}")
            day = time.strftime("%Y-%m-%d", time.gmtime())
            for scope in (f"user:{user}", f"channel:{channel}"):
                await stores.usage.add(
                    f"{day}:{scope}", final.trace.total_tokens, expire_at=time.time() + 86400
                )
        seconds = time.perf_counter() - started
        model.assert_complete()
        by_kind: dict[str, list[int]] = defaultdict(list)
        no_ttl: list[str] = []
        async for key in client.scan_iter(match=prefix + "*", count=500):
            by_kind[kind_of(key, prefix)].append(await client.memory_usage(key) or 0)
            if await client.ttl(key) == -1:
                no_ttl.append(key.removeprefix(prefix))
        total = sum(sum(v) for v in by_kind.values())
        keys = sum(len(v) for v in by_kind.values())
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        bound = f", redis.max_traces {max_traces}" if max_traces else ""
        print(f"{turn_count} realistic turns in {seconds:.2f} s{bound}; load average {load}")
        print(f"{'key kind':<16} {'keys':>5} {'MEMORY USAGE':>13}")
        for kind, sizes in sorted(by_kind.items(), key=lambda kv: -sum(kv[1])):
            print(f"{kind:<16} {len(sizes):>5} {sum(sizes):>13,}")
        print(f"{'total':<16} {keys:>5} {total:>13,}  ({total / 1024:.1f} KiB per conversation)")
        print("keys without a TTL:", ", ".join(no_ttl) or "none")
    finally:
        keys = [k async for k in client.scan_iter(match=prefix + "*", count=500)]
        if keys:
            await client.delete(*keys)
        await stores.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--max-traces", type=int, default=0, help="redis.max_traces (0: none)")
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.max_traces))
