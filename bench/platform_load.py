"""Load on the chat platforms: many concurrent questions through each platform's local fake.

    .venv/bin/python -m bench.platform_load [--platform discord] [--conversations 1,50,500]

For each platform section and each level: N questions at once, each in its own channel,
answered by a deterministic streaming model (several chunks per step, one tool step then the
answer). Prints edits per channel per second (the busiest 1-second window, and the mean rate),
the rate-limit hits (429s the fake answered; must be 0: the fake enforces Discord's 5 writes
per 5 s per channel), the delay from the first model token to the first visible edit, and from
the last model token (the run's final event) to the final state reaching the platform.

"Reaching the platform" is when the fake received the final edit: that is when Discord would
show it. (discord.py itself may return later: it holds the request that spent a bucket's last
write until the bucket resets.)

Targets (issue 18): last token -> final p99 under 150 ms at 1 and 50 conversations, first token
-> first edit p50 under 100 ms, 0 rate-limit hits at every level.

Sections register in ``SECTIONS``; the Slack adapter adds its own beside Discord's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import statistics
import sys
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from bench.models import StepScriptModel
from core.agent import Agent
from core.history import InMemoryHistoryStore
from core.stores import InMemoryLocks, InMemoryTraceStore, Stores
from core.tools import FunctionTool, ToolRegistry

if TYPE_CHECKING:  # the Discord adapter and its fake load only when that section runs
    from adapters.discord.cog import Live
    from tests.fakes.discord_server import FakeDiscord


@dataclass(frozen=True, slots=True)
class Options:
    channels: int
    """Conversations at once, each in its own channel."""
    interval: float
    chunks: int
    chunk_delay: float


@dataclass(frozen=True, slots=True)
class Figures:
    platform: str
    runs: int
    seconds: float
    edits_per_channel_max: float
    edits_per_channel_mean: float
    rate_limit_hits: int
    first_edit_p50: float
    first_edit_p99: float
    final_p50: float
    final_p99: float
    finals: int
    """Runs whose final state reached the platform (must be ``runs``)."""


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def busiest_second(times: Sequence[float]) -> int:
    """Most events inside any 1-second window."""
    best, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= 1.0:
            start += 1
        best = max(best, end - start + 1)
    return best


def build_agent(options: Options) -> tuple[Agent, InMemoryHistoryStore, InMemoryTraceStore]:
    async def calculate(arg: str) -> str:
        return "42"

    tools = ToolRegistry()
    tools.add(FunctionTool("calculate", calculate, description="math", example="calculate[1+1]"))
    history, traces = InMemoryHistoryStore(), InMemoryTraceStore()
    model = StepScriptModel(steps=1, chunks=options.chunks, delay=options.chunk_delay)
    agent = Agent(model, tools, history=history, traces=traces, locks=InMemoryLocks())
    return agent, history, traces


# ---- Discord ------------------------------------------------------------------------------


async def discord_section(options: Options) -> Figures:
    with warnings.catch_warnings():  # discord.py imports the deprecated audioop
        warnings.simplefilter("ignore", DeprecationWarning)
        from adapters.discord.client import create_bot
        from adapters.discord.cog import Services
        from adapters.discord.settings import DiscordSettings
        from adapters.policy import Policy
    from tests.fakes.discord_server import CHANNEL_ID, FakeDiscord

    fake = FakeDiscord(channel_limit=(5, 5.0), token="bench-token")
    channel_ids = [CHANNEL_ID + i for i in range(options.channels)]
    for channel_id in channel_ids:
        fake.add_channel(channel_id)
    await fake.start()
    agent, history, traces = build_agent(options)
    lives: list[Live] = []
    settings = DiscordSettings(
        api_base_url=fake.api_base_url,
        edit_interval=options.interval,
        tick=options.interval,
        guild_ready_timeout=0.05,
    )
    bot = create_bot(
        Services(
            agent,
            dataclasses.replace(Stores.in_memory(), history=history, traces=traces),
            settings,
            Policy("discord", cooldown_seconds=0),
            lives.append,
        )
    )
    task = asyncio.create_task(bot.start("bench-token"))
    try:
        async with asyncio.timeout(30):
            await fake.identified.wait()
            await bot.wait_until_ready()
        started = time.monotonic()
        for n, channel_id in enumerate(channel_ids):
            payload = fake.message_create(
                f"question {n}", channel_id=channel_id, author_id=5000 + n
            )
            await fake.dispatch("MESSAGE_CREATE", payload)
        totals = await fake.wait_for_calls(
            # the content (text layout) or a Text Display (the default components layout)
            lambda c: c.method == "POST" and "**Totals**" in json.dumps(c.json),
            options.channels,
            within=120,
        )
        seconds = totals[-1].at - started
    finally:
        await bot.close()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await fake.stop()
    return discord_figures(fake, lives, channel_ids, seconds)


def discord_figures(
    fake: FakeDiscord, lives: Sequence[Live], channel_ids: Sequence[int], seconds: float
) -> Figures:
    maxima: list[int] = []
    rates: list[float] = []
    for channel_id in channel_ids:
        edits = [
            c.at
            for c in fake.calls
            if c.method == "PATCH"
            and c.path.startswith(f"/channels/{channel_id}/")
            and c.status == 200
        ]
        if len(edits) >= 2:
            maxima.append(busiest_second(edits))
            rates.append((len(edits) - 1) / (edits[-1] - edits[0]))
    delays = [
        live.stats.first_visible_at - live.stats.first_text_at
        for live in lives
        if live.stats.first_visible_at is not None and live.stats.first_text_at is not None
    ]
    finals = final_delays(fake, lives)
    return Figures(
        platform="discord",
        runs=len(lives),
        seconds=seconds,
        edits_per_channel_max=float(max(maxima, default=0)),
        edits_per_channel_mean=statistics.fmean(rates) if rates else 0.0,
        rate_limit_hits=fake.rate_limited,
        first_edit_p50=percentile(delays, 0.5),
        first_edit_p99=percentile(delays, 0.99),
        final_p50=percentile(finals, 0.5),
        final_p99=percentile(finals, 0.99),
        finals=len(finals),
    )


def final_delays(fake: FakeDiscord, lives: Sequence[Live]) -> list[float]:
    """Per run: its final event -> the fake receiving the message's last edit."""
    last_edit: dict[str, float] = {}
    for call in fake.calls:
        if call.method == "PATCH" and call.status == 200 and "/messages/" in call.path:
            last_edit[call.path.rsplit("/", 1)[-1]] = call.at
    delays = []
    for live in lives:
        arrived = last_edit.get(str(live.surface.message.id))  # type: ignore[attr-defined]
        if arrived is not None and live.stats.final_at is not None:
            delays.append(arrived - live.stats.final_at)
    return delays


# ---- the runner ---------------------------------------------------------------------------

SECTIONS: dict[str, Callable[[Options], Awaitable[Figures]]] = {"discord": discord_section}


def report(figures: Figures, options: Options) -> str:
    ok = "OK" if figures.rate_limit_hits == 0 else "FAIL"
    return "\n".join(
        [
            f"== {figures.platform}: {figures.runs} concurrent questions in "
            f"{options.channels} channels, live interval {options.interval:g} s ==",
            f"all answered in              {figures.seconds:.1f} s",
            f"edits/channel/s              max {figures.edits_per_channel_max:.0f} (busiest 1-s"
            f" window) · mean {figures.edits_per_channel_mean:.2f}",
            f"rate-limit hits              {figures.rate_limit_hits} ({ok}: must be 0)",
            f"first token -> first edit    p50 {figures.first_edit_p50 * 1000:.0f} ms"
            f" · p99 {figures.first_edit_p99 * 1000:.0f} ms",
            f"last token -> final visible  p50 {figures.final_p50 * 1000:.0f} ms"
            f" · p99 {figures.final_p99 * 1000:.0f} ms ({figures.finals}/{figures.runs} finals)",
        ]
    )


async def run(platforms: Sequence[str], levels: Sequence[int], options: Options) -> int:
    failed = False
    for name in platforms:
        for level in levels:
            at_level = replace(options, channels=level)
            figures = await SECTIONS[name](at_level)
            print(report(figures, at_level), flush=True)
            failed |= figures.rate_limit_hits != 0 or figures.finals != figures.runs
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--platform", choices=[*SECTIONS, "all"], default="all")
    parser.add_argument(
        "--conversations",
        default="1,50,500",
        help="levels to run, comma-separated: questions at once, each in its own channel",
    )
    parser.add_argument(
        "--interval", type=float, default=1.2, help="least seconds between live edits (s)"
    )
    parser.add_argument("--chunks", type=int, default=12, help="model chunks per step")
    parser.add_argument("--chunk-delay", type=float, default=0.1, help="seconds between chunks")
    args = parser.parse_args(argv)
    levels = [int(n) for n in str(args.conversations).split(",") if n.strip()]
    options = Options(levels[0], args.interval, args.chunks, args.chunk_delay)
    platforms = list(SECTIONS) if args.platform == "all" else [args.platform]
    return asyncio.run(run(platforms, levels, options))


if __name__ == "__main__":
    sys.exit(main())
