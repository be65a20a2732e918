"""Scale-out: 1 and 2 bot processes on one Redis, against the fakes, at growing load.

    scripts/with-redis .venv/bin/python -m bench.scaleout [--platform discord|slack|all]
        [--processes 1,2] [--conversations 100,200,400,800] [--seconds 40]

Each bot process is a child wired as ``reactbot serve`` wires it (``App.create``, Redis
stores on one shared prefix, ``settle_heap``, the offline demo model streaming its steps).
Discord: process i of N runs shard i (``discord.shard_count: N``, ``discord.shard_ids:
[i]``) and the fake gateway routes each guild's events to the shard that owns it, as Discord
does; the conversations are spread over two guilds, one per shard of two. Slack: N replicas in
HTTP mode, and the users' requests go to them in turn (a load balancer). The fake and the
users who talk to it run in this process: on a 2-core machine they take part of a core, so two
bot processes have a little under two cores between them.

For every load (interleaved: 1 process, then 2, at each load) it prints the runs asked, their
final states, answers, refusals ("ask again"), failures, events answered more than once, and
the event-loop lag p99 and max of the worst process; then, per process count, the largest
load that met the target: loop lag p99 < 100 ms, every run answered, no refusal, no event
answered twice. The machine's load is printed before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.soak import (
    ANSWER,
    DEMO_DELAY,
    DISCORD_TOKEN,
    QUESTION,
    SLACK_SECRET,
    BotFigures,
    Conversation,
    _converse,
    _forget,
    _state,
    asker,
    free_port,
    percentile,
    sample_lag,
    slash_ask,
    until_healthy,
)

LAG_TARGET = 0.1
THINK = 5.0
"""Mean seconds a person reads an answer before asking again (as in the soak)."""


# ---- one bot process (a child) ------------------------------------------------------------


async def bot_process(
    platform: str, index: int, count: int, api: str, port: int, prefix: str
) -> None:
    from bot.app import App
    from bot.config import Config, Secrets
    from bot.serve import settle_heap

    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    settings: dict[str, Any] = {
        "redis": {"url": redis_url, "prefix": prefix},
        "ops": {"enabled": False},
    }
    if platform == "discord":
        settings["discord"] = {
            "api_base_url": api,
            "cooldown_seconds": 0,
            "shard_count": count,
            "shard_ids": [index],
        }
        env = {"DISCORD_TOKEN": DISCORD_TOKEN}
    else:
        settings["slack"] = {
            "mode": "http",
            "port": port,
            "api_base_url": api,
            "cooldown_seconds": 0,
            "workspace_updates_per_minute": 0,
        }
        env = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": SLACK_SECRET}
    config = Config.model_validate({**settings, "secrets": Secrets.from_env(env)})
    app = App.create(config, demo_delay=DEMO_DELAY)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # discord.py imports audioop
        from bot.serve_discord import serve_discord
        from bot.serve_slack import serve_slack
    settle_heap()
    figures = BotFigures()
    serve = asyncio.create_task((serve_discord if platform == "discord" else serve_slack)(app))
    lag = asyncio.create_task(sample_lag(figures))
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.readline)  # "measure": the load has started
    figures.lags.clear()
    await loop.run_in_executor(None, sys.stdin.readline)  # "stop"
    lag.cancel()
    errors = app.health.failures if app.health is not None else 0
    lags = list(figures.lags)
    serve.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await serve
    await app.aclose()
    sys.stdout.write(
        json.dumps(
            {
                "lag_p99": percentile(lags, 0.99),
                "lag_max": max(lags, default=float("nan")),
                "redis_errors": errors,
            }
        )
        + "\n"
    )
    sys.stdout.flush()


# ---- the fake and its users (this process) ------------------------------------------------


@dataclass
class Trial:
    platform: str
    processes: int
    conversations: int
    sent: int = 0
    final: int = 0
    answered: int = 0
    refused: int = 0
    twice: int = 0
    lag_p99: float = float("nan")
    lag_max: float = float("nan")
    redis_errors: int = 0

    @property
    def failed(self) -> int:
        return self.sent - self.answered - self.refused

    @property
    def met(self) -> bool:
        return (
            self.lag_p99 < LAG_TARGET
            and self.failed == 0
            and self.refused == 0
            and self.twice == 0
            and self.sent > 0
        )


LOGS = Path(tempfile.gettempdir()) / "reactbot-scaleout"
"""Where each bot process's log goes (its warnings would bury the table)."""


async def _start_bots(
    platform: str, count: int, api: str, prefix: str, load: int
) -> list[tuple[Any, int]]:
    bots = []
    LOGS.mkdir(exist_ok=True)
    for index in range(count):
        port = free_port()
        log = (LOGS / f"{platform}-{load}-{index + 1}of{count}.log").open("wb")
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.scaleout",
            "--bot",
            f"{platform},{index},{count},{api},{port},{prefix}",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
        )
        log.close()
        assert child.stdout is not None
        assert (await child.stdout.readline()).strip() == b"ready"
        bots.append((child, port))
    return bots


async def _stop_bots(bots: list[tuple[Any, int]], trial: Trial) -> None:
    worst: list[dict[str, Any]] = []
    for child, _ in bots:
        child.stdin.write(b"stop\n")
        await child.stdin.drain()
    for child, _ in bots:
        line = await child.stdout.readline()
        with contextlib.suppress(ValueError):
            worst.append(json.loads(line))
        with contextlib.suppress(Exception):
            await asyncio.wait_for(child.wait(), 30)
        if child.returncode is None:
            child.kill()
    if worst:
        trial.lag_p99 = max(f["lag_p99"] for f in worst)
        trial.lag_max = max(f["lag_max"] for f in worst)
        trial.redis_errors = sum(f["redis_errors"] for f in worst)


async def _measure(bots: list[tuple[Any, int]]) -> None:
    for child, _ in bots:
        child.stdin.write(b"measure\n")
        await child.stdin.drain()


def _tally(trial: Trial, talks: Sequence[Conversation]) -> None:
    trial.sent = sum(c.sent for c in talks)
    trial.final = sum(c.final for c in talks)
    trial.answered = sum(c.answered for c in talks)
    trial.refused = sum(c.refused for c in talks)


async def discord_trial(processes: int, conversations: int, seconds: float) -> Trial:
    from tests.fakes.discord_server import CHANNEL_ID, GUILD_ID, FakeDiscord

    guilds = (GUILD_ID, GUILD_ID + (1 << 22))  # shard 1 and shard 0 of two
    fake = FakeDiscord(
        token=DISCORD_TOKEN,
        channel_limit=(5, 5.0),
        identify_interval=0.0,
        guilds=guilds,
        recommended_shards=processes,
    )
    for n in range(conversations):
        fake.add_channel(CHANNEL_ID + n, guild=guilds[n % 2])
    await fake.start()
    trial = Trial("discord", processes, conversations)
    prefix = f"reactbot-scaleout:{uuid.uuid4().hex[:8]}:"
    bots = await _start_bots("discord", processes, fake.api_base_url, prefix, conversations)
    try:
        async with asyncio.timeout(60):
            while len(fake.live_sessions) < processes:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # the guilds arrive after READY
        replies: dict[str, list[int]] = collections.defaultdict(list)
        seen = 0

        def index() -> None:
            nonlocal seen
            for mid in fake.created[seen:]:
                ref = fake.messages.get(mid, {}).get("message_reference") or {}
                if ref.get("message_id"):
                    replies[str(ref["message_id"])].append(mid)
            seen = len(fake.created)

        async def ask(talk: Conversation) -> str:
            payload = fake.message_create(
                QUESTION, channel_id=CHANNEL_ID + talk.index, author_id=asker(talk)
            )
            await fake.dispatch("MESSAGE_CREATE", payload)
            return str(payload["id"])

        def outcome(question: str) -> tuple[float | None, float | None, str | None]:
            index()
            mids = replies.get(question)
            if not mids:
                return None, None, None
            shown = json.dumps(fake.messages[mids[0]])
            if "ask again" in shown and ANSWER not in shown:
                return None, None, "refused"
            return None, None, _state(shown, "reactbot:stop:")

        talks = [Conversation(n) for n in range(conversations)]
        await _measure(bots)
        stop_at = time.monotonic() + seconds
        await asyncio.gather(*(_converse(t, stop_at, ask, outcome, THINK) for t in talks))
        await asyncio.sleep(1.0)  # a second answer to any question would be posted by now
        index()
        trial.twice = sum(1 for mids in replies.values() if len(mids) > 1)
        _tally(trial, talks)
    finally:
        await _stop_bots(bots, trial)
        await fake.stop()
        await _forget(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), prefix)
    return trial


async def slack_trial(processes: int, conversations: int, seconds: float) -> Trial:
    import aiohttp
    from slack_sdk.signature import SignatureVerifier

    from tests.fakes.slack_server import FakeSlack

    signer = SignatureVerifier(SLACK_SECRET)
    trial = Trial("slack", processes, conversations)
    prefix = f"reactbot-scaleout:{uuid.uuid4().hex[:8]}:"
    async with FakeSlack() as fake, aiohttp.ClientSession() as session:
        bots = await _start_bots(
            "slack", processes, fake.base_url.rstrip("/"), prefix, conversations
        )
        ports = [port for _, port in bots]
        try:
            for port in ports:
                await until_healthy(session, port)
            told: set[str] = set()
            turn = 0

            async def ask(talk: Conversation) -> tuple[str, int, str]:
                nonlocal turn
                channel = f"C{talk.index:06d}"
                count = len(fake.roots(channel))
                name = f"scale-{talk.index}-{talk.sent}"
                body, headers = slash_ask(fake, signer, talk, channel, name)
                port, turn = ports[turn % len(ports)], turn + 1  # the load balancer
                url = f"http://127.0.0.1:{port}/slack/events"
                async with session.post(url, data=body, headers=headers) as response:
                    if "ask again" in await response.text():
                        told.add(name)
                return channel, count, name

            def outcome(handle: tuple[str, int, str]) -> tuple[None, None, str | None]:
                channel, count, name = handle
                roots = fake.roots(channel)
                if len(roots) <= count:
                    return None, None, "refused" if name in told else None
                root = roots[count]
                if len(root.versions) < 2:
                    return None, None, None
                return None, None, _state(json.dumps([root.text, root.blocks]), "reactbot_stop")

            talks = [Conversation(n) for n in range(conversations)]
            await _measure(bots)
            stop_at = time.monotonic() + seconds
            await asyncio.gather(*(_converse(t, stop_at, ask, outcome, THINK) for t in talks))
            await asyncio.sleep(1.0)
            for talk in talks:  # each question asked once is one root in its channel
                extra = len(fake.roots(f"C{talk.index:06d}")) - talk.sent
                trial.twice += max(0, extra)
            _tally(trial, talks)
        finally:
            await _stop_bots(bots, trial)
            await _forget(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), prefix)
    return trial


def line(t: Trial) -> str:
    return (
        f"{t.platform:<8} {t.processes:>9} {t.conversations:>13} {t.sent:>6} {t.answered:>8}"
        f" {t.refused:>7} {t.failed:>6} {t.twice:>5}"
        f" {t.lag_p99 * 1000:>9.0f} ms {t.lag_max * 1000:>7.0f} ms  {'met' if t.met else 'not met'}"
    )


async def run(
    platforms: Sequence[str], processes: Sequence[int], levels: Sequence[int], seconds: float
) -> int:
    print(
        f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)"
    )
    print("platform processes conversations  asked answered refused failed twice  lag p99      max")
    trials: list[Trial] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for platform in platforms:
            for level in levels:
                for count in processes:  # interleaved: 1 then 2 processes at each load
                    trial = await (discord_trial if platform == "discord" else slack_trial)(
                        count, level, seconds
                    )
                    trials.append(trial)
                    print(line(trial), flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"the bot processes' logs: {LOGS}/")
    for platform in platforms:
        best = {
            count: max(
                (
                    t.conversations
                    for t in trials
                    if t.platform == platform and t.processes == count and t.met
                ),
                default=0,
            )
            for count in processes
        }
        figures = ", ".join(
            f"{count} process{'es' if count > 1 else ''}: {best[count]}" for count in processes
        )
        ratio = ""
        if len(processes) > 1 and best[processes[0]]:
            ratio = f" ({best[processes[-1]] / best[processes[0]]:.1f}x)"
        print(f"{platform}: largest load meeting the target: {figures}{ratio}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--platform", choices=["discord", "slack", "all"], default="all")
    parser.add_argument("--processes", default="1,2")
    parser.add_argument("--conversations", default="100,200,400,800")
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--bot", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bot:
        platform, index, count, api, port, prefix = args.bot.split(",")
        asyncio.run(bot_process(platform, int(index), int(count), api, int(port), prefix))
        return 0
    platforms = ["discord", "slack"] if args.platform == "all" else [args.platform]
    processes = [int(x) for x in args.processes.split(",")]
    levels = [int(x) for x in args.conversations.split(",")]
    return asyncio.run(run(platforms, processes, levels, args.seconds))


if __name__ == "__main__":
    sys.exit(main())
