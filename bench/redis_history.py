"""Redis memory per conversation, over every key a conversation writes, after realistic turns.

Run: ``scripts/with-redis .venv/bin/python bench/redis_history.py [--turns 20]
[--max-traces N]`` (``redis.max_traces``: with fewer than ``--turns``, the oldest traces go).

Each turn is one question on the real answering pipeline (``adapters.dispatch.handlers.ask.Answering``:
budgets, cooldown, run slot, the channel's settings, the run registry's heartbeat, token
counts) over the real ``Agent`` and the Redis ``Stores`` bundle, as a Slack surface drives
it: the event is claimed first, an admin sets the channel's verbosity once, readers vote on
every fourth answer (the trace is stored again with the vote) and one tool is allowed for the
conversation. The model is scripted with the sizes ``bench/realistic_model.py`` streams:
three tool steps, each a thought of 200-400 characters, then an answer of 600-1,000
characters, in chunks of 3-6 characters, with token usage. The tools are the real ones: web
search (``SearchTool`` through tavily-python to the Tavily fake, three results of real prose
and a short answer, cached in Redis under the same prefix), the knowledge base (``LookupTool``
over the project's ``docs/``: a section and passages) and the calculator. Model text and
search results are cut from Python's own documentation (``pydoc_data``), real English that
compresses as real prose does.

Memory is ``MEMORY USAGE`` of every key under the bench's own prefix (the shared
``recent-traces`` index included) once the turns are done, per kind of key with its TTL;
keys that live only while a turn runs (the conversation's lock, the run registry, the run
slot, the cooldown) are sampled in the middle of the first 20 turns and shown apart. The total is
compared with issue 25's target, 50 KB (50,000 bytes). Keys are deleted at the end.

Then the asker keeps ``--memories`` memories (100 by default, issue 43's ``memory.max_per_user``)
through ``remember`` as a run would (facts of 40-200 characters of the same prose): their
bytes per person are shown apart, since they persist on purpose and are the person's, not the
conversation's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from pydoc_data.topics import topics
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapters.channels import ChannelChoices  # noqa: E402
from adapters.dispatch.checks import Admitted as Ask  # noqa: E402
from adapters.dispatch.checks import Ticket  # noqa: E402
from adapters.dispatch.handlers.ask import Answering  # noqa: E402
from adapters.live import LiveStats, RunView, Verbosity  # noqa: E402
from adapters.policy import Policy  # noqa: E402
from core.agent import Agent, AgentSettings, Run  # noqa: E402
from core.budgets import TokenBudgets  # noqa: E402
from core.events import Event  # noqa: E402
from core.knowledge import LookupTool  # noqa: E402
from core.llm import Usage  # noqa: E402
from core.memories import Asking, Memories, MemorySettings, Where  # noqa: E402
from core.scripted import ScriptedModel, Turn  # noqa: E402
from core.stores import Stores, record_vote  # noqa: E402
from core.stores.redis import PERSISTENT_KINDS  # noqa: E402
from core.stores.redis.memories import KIND as MEMORIES  # noqa: E402
from core.tools import ToolRegistry, ToolResult  # noqa: E402
from core.tools.calculator import CalculatorTool  # noqa: E402
from core.tools.search import RedisSearchCache, SearchTool  # noqa: E402
from tests.fakes.tavily_server import FakeTavily, Reply  # noqa: E402

TARGET_BYTES, TARGET_TURNS = 50_000, 20
"""Issue 25: at most 50 KB per conversation after 20 realistic turns."""
DOCS = ROOT / "docs"
CORPUS = " ".join(" ".join(text.split()) for _, text in sorted(topics.items()))
"""Python's own documentation as one line of real English (about 0.8 MB)."""
HEADINGS = sorted(
    {
        m.group(1).strip()
        for path in DOCS.glob("*.md")
        for m in re.finditer(r"^#{2,3} (.+)$", path.read_text(), re.M)
    }
)
"""What people ask the knowledge base about: the docs' own section titles."""


def prose(rng: random.Random, chars: int) -> str:
    """``chars`` characters of real English, starting at a word."""
    start = CORPUS.index(" ", rng.randrange(0, len(CORPUS) - chars - 200)) + 1
    return CORPUS[start : start + chars].strip()


def search_reply(rng: random.Random) -> Reply:
    """Tavily's answer to one search: three results (title, URL, a long snippet) and a short
    answer, as the real API sends them (``SearchTool`` squashes each to its limits)."""
    results = [
        {
            "title": prose(rng, rng.randint(40, 90)),
            "url": f"https://{rng.choice(['docs', 'www', 'en'])}.example{n}.org/"
            f"{uuid.UUID(int=rng.getrandbits(128)).hex[:12]}/{prose(rng, 20).replace(' ', '-')}",
            "content": prose(rng, rng.randint(350, 700)),
            "score": round(0.95 - n * 0.1, 2),
        }
        for n in range(3)
    ]
    return Reply.ok(results, answer=prose(rng, rng.randint(200, 400)))


def chunked(text: str, rng: random.Random, usage: Usage) -> Turn:
    """One reply streamed in chunks of 3-6 characters (``ScriptedModel`` takes one size per
    reply: drawn per reply, mean 4.5, as ``realistic_model.py``'s per chunk)."""
    return Turn(text, chunk_size=rng.randint(3, 6), usage=usage)


def expression(rng: random.Random) -> str:
    return f"{rng.randint(100, 99999)}/{rng.randint(2, 999)}*{rng.randint(2, 60)}"


def turns_for(rng: random.Random, i: int, observations: str) -> list[Turn]:
    """Three tool steps, then the answer: with ``calculator`` observations three calculations
    (``realistic_model.py``'s replies), with ``tools`` a search, a lookup and a calculation."""
    usage = Usage(1800 + 600 * min(i, 10), 180)  # the history holds 10 turns
    if observations == "tools":
        steps = [
            ("search", " ".join(prose(rng, 60).split()[:6])),
            ("lookup", rng.choice(HEADINGS)),
            ("calculate", expression(rng)),
        ]
    else:
        steps = [("calculate", expression(rng)) for _ in range(3)]
    script = [
        chunked(f"Thought: {prose(rng, rng.randint(200, 400))}\nAction: {tool}[{arg}]", rng, usage)
        for tool, arg in steps
    ]
    answer = prose(rng, rng.randint(600, 1000))
    thought = prose(rng, rng.randint(60, 120))
    script.append(chunked(f"Thought: {thought}\nFinal Answer: {answer}", rng, usage))
    return script


# ---- the surface's half --------------------------------------------------------------------


@dataclass
class Sampled:
    """Keys seen while a turn runs: kind -> the largest MEMORY USAGE and TTLs seen."""

    bytes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    ttls: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    count: int = 0


SAMPLED_CALLS = 60
"""Calculations (mid-turn) at which the keys are sampled: those of the first 20 turns."""


class Follower:
    """Drains the run's events as a live message would."""

    def __init__(self) -> None:
        self.stats = LiveStats()

    async def follow(self, events: AsyncIterator[Event]) -> object:
        async for _ in events:
            pass
        return None


class Sampling:
    """The calculator, sampling the keys first: they are read while the run goes (its lock,
    the registry, the run slot, the cooldown exist only then)."""

    def __init__(self, tool: CalculatorTool, sample: Callable[[], Awaitable[None]]) -> None:
        self._tool, self._sample = tool, sample
        self.name, self.description = tool.name, tool.description
        self.example, self.input_name, self.hints = tool.example, tool.input_name, tool.hints

    async def run(self, arg: str) -> str | ToolResult:
        await self._sample()
        return await self._tool.run(arg)


class BenchReply:
    """``adapters.dispatch.handlers.ask.Reply`` of one Slack question: the thread is the conversation."""

    def __init__(self, conversation: str) -> None:
        self._conversation = conversation

    async def open(self, verbosity: Verbosity) -> str | None:
        return self._conversation

    def reading(self) -> AbstractAsyncContextManager[object]:
        return nullcontext()

    async def show(self, run: Run, view: RunView) -> Follower:
        return Follower()

    async def note(self, text: str) -> None:
        return None

    async def ended(self, run: Run) -> None:
        return None

    def where(self) -> dict[str, str]:
        return {"channel": "C0123456789", "ts": "1733220000.000100"}


# ---- measuring -----------------------------------------------------------------------------


def kind_of(key: str, prefix: str) -> str:
    return key.removeprefix(prefix).split(":", 1)[0]


def ttl_text(ttls: set[int], kind: str) -> str:
    if not ttls:
        return ""
    if ttls == {-1}:
        return "none (persists)" if kind in PERSISTENT else "NONE"
    low, high = min(ttls), max(ttls)

    def one(seconds: int) -> str:
        for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
            if seconds >= size:
                return f"{seconds / size:.3g} {unit}"
        return f"{seconds} s"

    return one(high) if high - low <= max(60, high // 100) else f"{one(low)}-{one(high)}"


async def scan(client: Any, prefix: str) -> dict[str, list[tuple[int, int]]]:
    """kind -> [(MEMORY USAGE, TTL s)] of every key under ``prefix``."""
    found: dict[str, list[tuple[int, int]]] = defaultdict(list)
    async for key in client.scan_iter(match=prefix + "*", count=1000):
        size, ttl = await client.memory_usage(key, samples=0), await client.ttl(key)
        if size and ttl != -2:  # -2, None: the key went between SCAN and now (a lock)
            found[kind_of(key, prefix)].append((size, ttl))
    return found


PERSISTENT = PERSISTENT_KINDS | {MEMORIES}


async def remember_many(stores: Stores, count: int, rng: random.Random, ada: Asking) -> None:
    """``count`` facts kept by ``ada``, as ``remember`` keeps them (one script each)."""
    memories = Memories(stores.memories, MemorySettings(max_per_user=max(1, count)))
    for i in range(count):
        await memories.remember(ada, prose(rng, rng.randint(40, 200)), "person", trace=f"t{i}")


async def main(
    turn_count: int, max_traces: int = 0, observations: str = "calculator", memories: int = 100
) -> int:
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    prefix = f"reactbot-bench:{uuid.uuid4().hex[:8]}:"
    stores = Stores.redis(url, prefix=prefix, max_traces=max_traces)
    assert stores.shared is not None
    client = stores.shared.client
    rng = random.Random(25)
    team, channel, user = "T0123456789", "C0123456789", "U0123456789"
    conversation = f"slack:{team}:{channel}:1733220000.000100"
    place = f"slack:{team}:{channel}"
    script: list[Turn | str] = [
        t for i in range(turn_count) for t in turns_for(rng, i, observations)
    ]
    model = ScriptedModel(script)
    calculator = CalculatorTool()
    sampled = Sampled()

    async def sample() -> None:
        sampled.count += 1
        if sampled.count > SAMPLED_CALLS:  # the same keys every turn; a scan costs O(keys)
            return
        for kind, keys in (await scan(client, prefix)).items():
            sampled.bytes[kind] = max(sampled.bytes[kind], sum(size for size, _ in keys))
            sampled.ttls[kind].update(ttl for _, ttl in keys)

    sampling = Sampling(calculator, sample)
    async with FakeTavily(api_key="tvly-bench") as tavily:
        if observations == "tools":
            tavily.enqueue(*(search_reply(rng) for _ in range(turn_count)))
        search = SearchTool(
            api_key="tvly-bench",
            api_base_url=tavily.base_url,
            cache=RedisSearchCache(client, prefix=f"{prefix}search:"),
        )
        registry = ToolRegistry()
        tools = (search, LookupTool(DOCS), sampling) if observations == "tools" else (sampling,)
        for tool in tools:
            registry.add(tool)
        agent = Agent(model, registry, stores=stores, settings=AgentSettings(deadline=60))
        budgets = TokenBudgets(stores.usage, per_user=10**12, per_channel=10**12)
        answering: Answering[str] = Answering(
            agent,
            surface="slack",
            access=lambda who: _allowed(),
            policy=Policy("slack"),
            stores=stores,
            budgets=budgets,
            choices=ChannelChoices(stores.channel_settings, tools=registry),
            empty_question="Ask a question.",
            quote=lambda text: text,
        )
        await answering.start()
        try:
            started = time.perf_counter()
            for i in range(turn_count):
                event = f"slack:event:Ev{i:09d}"
                assert await stores.claims.claim(event)
                if i == 0:  # an admin picks the channel's verbosity once
                    await stores.channel_settings.put(place, "verbosity", "compact")
                question = f"{prose(rng, rng.randint(40, 160))}?"
                ask = Ask(
                    who=user,
                    user=user,
                    key=f"slack:{team}:{user}",
                    name="ada",
                    admin=False,
                    place=place,
                    question=question,
                    ident=event,
                )
                ticket = await answering.admit(ask)
                assert isinstance(ticket, Ticket), ticket
                await answering.answer(ticket, BenchReply(conversation))
                last = await stores.traces.last(conversation)
                assert last is not None and last.status == "answered", last
                if i % 4 == 3:  # a reader's 👍 on every fourth answer
                    assert await record_vote(stores.traces, last.id, "up", "U0987654321")
                if i == 1:  # the asker allows the search tool for the whole conversation
                    await stores.allowances.allow(conversation, "search", by=user)
                # the next question comes after the cooldown (5 s), as people ask
                await client.delete(f"{prefix}cooldown:{ask.key}")
            seconds = time.perf_counter() - started
            model.assert_complete()
            ada = Asking(user, "ada", False, Where("slack", team, place, private=False))
            await remember_many(stores, memories, rng, ada)
            kept = await scan(client, prefix)
            stored = await stores.traces.list(conversation, limit=turn_count)
            text = sum(
                len(t.question)
                + len(t.answer or "")
                + sum(len(s.thought) + len(s.observation or "") for s in t.steps)
                for t in stored
            )
        finally:
            await answering.aclose(grace=5)
            await calculator.aclose()
            await search.aclose()
            keys = [k async for k in client.scan_iter(match=prefix + "*", count=1000)]
            if keys:
                await client.delete(*keys)
            await stores.aclose()
    kept_memories = kept.pop(MEMORIES, [])
    code = report(turn_count, max_traces, observations, seconds, kept, sampled, text)
    size = sum(s for s, _ in kept_memories)
    ttl = ttl_text({t for _, t in kept_memories}, MEMORIES)
    print(
        f"memories: {memories} of one person in {size:,} bytes ({size / 1000:.1f} KB per "
        f"person, {size // max(1, memories):,} bytes a memory), TTL {ttl}"
    )
    return code


async def _allowed() -> str | None:
    return None


def report(
    turns: int,
    max_traces: int,
    observations: str,
    seconds: float,
    kept: dict[str, list[tuple[int, int]]],
    sampled: Sampled,
    text: int,
) -> int:
    total = sum(size for keys in kept.values() for size, _ in keys)
    count = sum(len(keys) for keys in kept.values())
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    bound = f", redis.max_traces {max_traces}" if max_traces else ""
    print(
        f"{turns} realistic turns ({observations} observations) in {seconds:.2f} s{bound}; "
        f"load average {load}"
    )
    print(f"{'key kind':<15} {'keys':>5} {'MEMORY USAGE':>13} {'per key':>8}  TTL")
    for kind, keys in sorted(kept.items(), key=lambda kv: -sum(s for s, _ in kv[1])):
        size = sum(s for s, _ in keys)
        ttl = ttl_text({t for _, t in keys}, kind)
        print(f"{kind:<15} {len(keys):>5} {size:>13,} {size // len(keys):>8,}  {ttl}")
    verdict = "meets" if total <= TARGET_BYTES else "MISSES"
    target = f"; {verdict} the {TARGET_BYTES // 1000} KB target" if turns == TARGET_TURNS else ""
    print(
        f"{'total':<15} {count:>5} {total:>13,}  ({total / 1000:.1f} KB per conversation{target})"
    )
    cached = sum(size for size, _ in kept.get("search", []))
    if cached:
        print(
            f"{'':<15} {'':>5} {total - cached:>13,}  without the search cache (shared by every "
            "conversation, gone after tools.search.cache_ttl)"
        )
    traces = sum(size for size, _ in kept.get("trace", []))
    print(
        f"the traces hold {text:,} characters of their own text (question, thoughts, "
        f"observations, answer; nothing counted twice) in {traces:,} bytes: "
        f"{traces / max(1, text):.2f} bytes a character"
    )
    during = {k: v for k, v in sampled.bytes.items() if k not in kept}
    if during:
        print("only while a turn runs (the most seen at once, mid-turn):")
        for kind, size in sorted(during.items(), key=lambda kv: -kv[1]):
            print(f"  {kind:<13} {size:>13,}           {ttl_text(sampled.ttls[kind], kind)}")
    untimed = sorted(
        kind
        for kind, ttls in [
            *((k, {t for _, t in v}) for k, v in kept.items()),
            *sampled.ttls.items(),
        ]
        if -1 in ttls and kind not in PERSISTENT
    )
    print("kinds with a key without a TTL, not meant to persist:", ", ".join(untimed) or "none")
    missed = turns == TARGET_TURNS and total > TARGET_BYTES
    return 1 if missed or untimed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--max-traces", type=int, default=0, help="redis.max_traces (0: none)")
    parser.add_argument(
        "--observations",
        choices=("calculator", "tools"),
        default="calculator",
        help="calculator: three calculations a turn, as realistic_model.py (issue 25's case); "
        "tools: a web search, a knowledge-base lookup and a calculation",
    )
    parser.add_argument(
        "--memories", type=int, default=100, help="memories the asker keeps (issue 43)"
    )
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.turns, args.max_traces, args.observations, args.memories)))
