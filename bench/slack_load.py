"""Load benchmark for the Slack adapter: many concurrent conversations through the real bolt
app (signed HTTP requests) and a local fake Slack Web API, with a scripted model.

    .venv/bin/python -m bench.slack_load [--conversations 200] [--channels 50] [--interval 1.0]

The fake enforces Slack's per-channel pace on ``chat.update`` (a 429 for more than
``1/interval`` calls in any one-second window), so "429s" counts real violations; it must be 0.

Printed: ``chat.update`` per channel per second (max over every channel-second, and the mean
rate of each channel while it was busy), 429s, the delay from a run's first model text to its
first visible update (p50/p99, from ``LiveMessage.stats``), the /ask ack time, and totals.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import time
import urllib.parse
from collections import Counter, defaultdict
from collections.abc import Sequence

import aiohttp
from slack_sdk.signature import SignatureVerifier

from adapters.slack.bot import SlackBot
from adapters.slack.render import STOP_ACTION_ID
from adapters.slack.server import HttpServer
from adapters.slack.settings import SlackSettings
from bench.models import StepScriptModel
from core.agent import Agent, AgentSettings
from core.history import InMemoryHistoryStore
from core.llm import Usage
from core.stores import InMemoryEventClaims, InMemoryLocks, InMemoryTraceStore
from core.tools import FunctionTool, ToolRegistry
from tests.fakes.slack_server import TEAM_ID, FakeSlack

SECRET = "bench-signing-secret"
TOKEN = "xoxb-bench"
"""The bot token the fake Slack accepts (it refuses any other with invalid_auth)."""


async def lookup(arg: str) -> str:
    await asyncio.sleep(0.2)
    return f"result for {arg}"


def signed(body: str) -> dict[str, str]:
    timestamp = str(int(time.time()))
    signature = SignatureVerifier(SECRET).generate_signature(timestamp=timestamp, body=body) or ""
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": signature,
    }


async def ask(
    session: aiohttp.ClientSession, url: str, fake: FakeSlack, n: int, channels: int
) -> float:
    form = {
        "command": "/ask",
        "text": f"benchmark question {n}",
        "user_id": f"U{n:05d}",
        "channel_id": f"C{n % channels:04d}",
        "team_id": TEAM_ID,
        "trigger_id": f"trigger-{n}",
        "response_url": fake.response_url(f"r{n}"),
    }
    body = urllib.parse.urlencode(form)
    started = time.monotonic()
    async with session.post(url, data=body.encode(), headers=signed(body)) as response:
        await response.read()
        if response.status != 200:
            raise RuntimeError(f"/ask {n} answered HTTP {response.status}")
    return time.monotonic() - started


async def warm_up(session: aiohttp.ClientSession, url: str) -> None:
    """One signed request before the burst: bolt caches ``auth.test`` on the first request,
    and a cold burst makes every concurrent request call it (measured separately)."""
    payload = {
        "type": "block_actions",
        "user": {"id": "UWARM"},
        "team": {"id": TEAM_ID},
        "actions": [{"type": "button", "action_id": STOP_ACTION_ID, "value": "none"}],
    }
    body = urllib.parse.urlencode({"payload": json.dumps(payload)})
    async with session.post(url, data=body.encode(), headers=signed(body)) as response:
        await response.read()


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


async def run(
    conversations: int,
    channels: int,
    interval: float,
    steps: int,
    *,
    warm: bool,
    workspace_per_minute: float,
) -> None:
    async with FakeSlack(token=TOKEN) as fake:
        fake.limit("chat.update", max(1, int(1 / interval)))
        tools = ToolRegistry()
        tools.add(FunctionTool("lookup", lookup, description="looks up", example="lookup[x]"))
        agent = Agent(
            StepScriptModel(
                steps=steps, chunks=12, action="lookup[item {n}]", usage=Usage(100, 20)
            ),
            tools,
            history=InMemoryHistoryStore(),
            traces=InMemoryTraceStore(),
            locks=InMemoryLocks(),
            settings=AgentSettings(deadline=600.0),
        )
        settings = SlackSettings(
            bot_token=TOKEN,
            signing_secret=SECRET,
            mode="http",
            host="127.0.0.1",
            port=0,
            api_base_url=fake.base_url,
            update_interval=interval,
            workspace_updates_per_minute=workspace_per_minute,
            cooldown_seconds=0.0,
            shutdown_grace=60.0,
        )
        bot = SlackBot(agent, claims=InMemoryEventClaims(), settings=settings)
        server = HttpServer(bot, host="127.0.0.1", port=0, path=settings.path)
        port = await server.start()
        url = f"http://127.0.0.1:{port}{settings.path}"
        started = time.monotonic()
        try:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
                if warm:
                    await warm_up(session, url)
                acks = await asyncio.gather(
                    *(ask(session, url, fake, n, channels) for n in range(conversations))
                )
            while bot.in_flight:  # noqa: ASYNC110 - polls the bot's task count
                await asyncio.sleep(0.05)
        finally:
            await server.stop()
            await bot.aclose()
        report(fake, bot, acks, time.monotonic() - started, conversations, channels, interval)


def report(
    fake: FakeSlack,
    bot: SlackBot,
    acks: Sequence[float],
    seconds: float,
    conversations: int,
    channels: int,
    interval: float,
) -> None:
    updates = fake.calls("chat.update", ok=True)
    per_second: Counter[tuple[str, int]] = Counter()
    by_channel: defaultdict[str, list[float]] = defaultdict(list)
    for call in updates:
        channel = str(call.args["channel"])
        per_second[(channel, int(call.at))] += 1
        by_channel[channel].append(call.at)
    rates = [
        (len(times) - 1) / (max(times) - min(times))
        for times in by_channel.values()
        if len(times) > 1 and max(times) > min(times)
    ]
    delays = [
        s.first_visible_at - s.first_text_at
        for s in bot.stats
        if s.first_visible_at is not None and s.first_text_at is not None
    ]
    answered = sum(1 for m in fake.roots() if "The answer is 42." in str(m.blocks))
    print(
        f"conversations: {conversations} over {channels} channels, update interval {interval:g} s"
    )
    print(f"answered (final state delivered): {answered}/{conversations}")
    print(
        f"total time: {seconds:.1f} s; chat.update calls: {len(updates)}; thread posts: "
        f"{len([m for m in fake.messages.values() if m.thread_ts])}"
    )
    print(
        f"updates per channel per second: max {max(per_second.values(), default=0)}, "
        f"mean {statistics.fmean(rates) if rates else 0:.2f} (while busy)"
    )
    print(
        f"429s from the fake: {fake.rate_limited} (must be 0); pacer postponements: {bot.pacer.rate_limited}"
    )
    refused = Counter(c.error for c in fake.records if c.error and c.status != 429)
    print(f"calls the fake refused (must be none): {dict(refused) or 0}")
    print(
        f"first model text -> first visible update: p50 {percentile(delays, 0.5):.2f} s, "
        f"p99 {percentile(delays, 0.99):.2f} s (n={len(delays)})"
    )
    print(
        f"/ask ack: p50 {percentile(acks, 0.5) * 1000:.0f} ms, p99 {percentile(acks, 0.99) * 1000:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--channels", type=int, default=50)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--steps", type=int, default=2, help="tool steps before the answer")
    parser.add_argument("--cold", action="store_true", help="no warm-up request before the burst")
    parser.add_argument(
        "--workspace-per-minute",
        type=float,
        default=0.0,
        help="chat.update budget across the workspace (the bot's default is 50; 0: per-channel "
        "pacing only, which is what this benchmark measures by default)",
    )
    args = parser.parse_args()
    asyncio.run(
        run(
            args.conversations,
            args.channels,
            args.interval,
            args.steps,
            warm=not args.cold,
            workspace_per_minute=args.workspace_per_minute,
        )
    )


if __name__ == "__main__":
    main()
