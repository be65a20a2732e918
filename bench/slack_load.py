"""Load benchmark for the Slack adapter: many concurrent conversations through the real bolt
app (signed HTTP requests) and a local fake Slack Web API, with a scripted model.

    .venv/bin/python -m bench.slack_load [--conversations 1,50] [--workspace-per-minute 50]

Each level asks that many questions at once, each in its own channel (``--channels`` spreads
them over fewer). Slack counts ``chat.update`` per workspace (Tier 3, "50+ per minute"): the
bot's budget is ``--workspace-per-minute`` and the fake enforces the same figure over any 60
seconds, so "429s" counts real violations; it must be 0. 0 turns the budget off on both sides
(per-channel pacing only).

Printed per level: ``chat.update`` per channel per second (max over every channel-second, and
the mean rate of each channel while it was busy), 429s, the delay from a run's first model
text to its first visible update and from its last model token (the final event) to Slack
confirming the final edit (p50/p99, from ``LiveMessage.stats``), the /ask ack time, totals.

Targets (issue 18): last token -> final p99 under 150 ms at 1 and 50 conversations, first text
-> first update p50 under 100 ms, 0 429s at every level. A workspace budget caps what any
pacing can do: 50 runs need 50 finals, so at 50 a minute 50 runs at once leave no update for
anything else (the report says how many finals had to wait).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import time
import urllib.parse
from collections import Counter, defaultdict
from collections.abc import Sequence

import aiohttp
from slack_sdk.signature import SignatureVerifier

from adapters.policy import Policy
from adapters.slack.blocks import STOP_ACTION_ID
from adapters.slack.bot import SlackBot
from adapters.slack.server import HttpServer
from adapters.slack.settings import SlackSettings
from bench.models import StepScriptModel
from core.agent import Agent, AgentSettings
from core.history import InMemoryHistoryStore
from core.llm import Usage
from core.stores import InMemoryLocks, InMemoryTraceStore, Stores
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
) -> bool:
    """One level; True when it met the hard conditions (no 429, every final delivered)."""
    async with FakeSlack(token=TOKEN) as fake:
        if workspace_per_minute > 0:
            fake.workspace_limit("chat.update", int(workspace_per_minute))
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
            shutdown_grace=60.0,
        )
        bot = SlackBot(
            agent,
            stores=Stores.in_memory(),
            settings=settings,
            policy=Policy("slack", cooldown_seconds=0.0),
        )
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
        return report(
            fake, bot, acks, time.monotonic() - started, conversations, channels, interval
        )


def report(
    fake: FakeSlack,
    bot: SlackBot,
    acks: Sequence[float],
    seconds: float,
    conversations: int,
    channels: int,
    interval: float,
) -> bool:
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
    finals = [
        s.final_visible_at - s.final_at
        for s in bot.stats
        if s.final_visible_at is not None and s.final_at is not None
    ]
    answered = sum(1 for m in fake.roots() if "The answer is 42." in str(m.blocks))
    budget = bot.pacer.shared.limit if bot.pacer.shared is not None else "no"
    print(
        f"== slack: {conversations} conversations over {channels} channels, live interval "
        f"{interval:g} s, workspace budget {budget} chat.update a minute =="
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
        f"first model text -> first visible update: p50 {percentile(delays, 0.5) * 1000:.0f} ms,"
        f" p99 {percentile(delays, 0.99) * 1000:.0f} ms (n={len(delays)})"
    )
    print(
        f"last model token -> final visible: p50 {percentile(finals, 0.5) * 1000:.0f} ms, "
        f"p99 {percentile(finals, 0.99) * 1000:.0f} ms (n={len(finals)}; finals that waited "
        f"for the budget: {bot.pacer.stats.waits['final']})"
    )
    print(
        f"/ask ack: p50 {percentile(acks, 0.5) * 1000:.0f} ms, p99 {percentile(acks, 0.99) * 1000:.0f} ms"
    )
    return fake.rate_limited == 0 and answered == conversations


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--conversations", default="1,50", help="levels to run, comma-separated (e.g. 1,50,500)"
    )
    parser.add_argument(
        "--channels", type=int, default=0, help="channels to spread them over (0: one each)"
    )
    parser.add_argument("--interval", type=float, default=1.0, help="least s between live updates")
    parser.add_argument("--steps", type=int, default=2, help="tool steps before the answer")
    parser.add_argument("--cold", action="store_true", help="no warm-up request before the burst")
    parser.add_argument(
        "--workspace-per-minute",
        type=float,
        default=50.0,
        help="chat.update budget across the workspace, for the bot and the fake alike (the "
        "bot's default is 50; 0: no budget, per-channel pacing only)",
    )
    args = parser.parse_args()
    ok = True
    for level in (int(n) for n in str(args.conversations).split(",") if n.strip()):
        ok &= asyncio.run(
            run(
                level,
                args.channels or level,
                args.interval,
                args.steps,
                warm=not args.cold,
                workspace_per_minute=args.workspace_per_minute,
            )
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
