"""Six hostile PDFs from six people at once, through one ``reactbot serve --platform slack``
process (Slack's strict fake serving the files to the bot token, the OpenAI fake), as issue 42
measured it: does any question wait for the others' files?

Run: ``PYTHONPATH=. .venv/bin/python bench/files_crowd.py [--people 6] [--pages 30]
[--parse-seconds 10] [--max-parallel 2]`` (Redis at ``REDIS_URL``, default
``redis://127.0.0.1:6379/0``; only this run's keys are written and deleted).

Each person mentions the bot in their own channel with a ``--pages``-page PDF bomb (6.6 KB
at 30 pages, minutes of CPU to read whole); a seventh person then asks a plain question
(no file) while the bombs are read, after the same question was timed on the idle process.
Printed: the machine's load; per person, when the live message showed Stop, when the
"took too long to read, skipped" line came and when the answer was final, all from the
mention; the plain question's answer time, idle and loaded; and the issue's targets: each
answered within ``parse_seconds`` x ceil(people / max_parallel) + 10 s, the first within
``parse_seconds`` + 10 s, the plain question delayed by at most 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import tempfile
import time
from pathlib import Path

import aiohttp

from adapters.slack.blocks import STOP_ACTION_ID
from adapters.words import FILES_QUEUED
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack, Message, message_text
from tests.hostile import pdf_bomb
from tests.integration.test_chaos import SECRET, mention, slack_event, step
from tests.integration.test_hostile_serve import forget_keys, launch
from tests.integration.test_serve import free_port, wait_for_http

SKIPPED = "took too long to read, skipped"


def config(port: int, slack: FakeSlack, *, parse_seconds: float, max_parallel: int) -> str:
    return (
        f"slack:\n  mode: http\n  port: {port}\n  api_base_url: {slack.base_url}\n"
        "  update_interval: 0.3\n  cooldown_seconds: 0\n"
        "model:\n  name: m\n  max_retries: 0\nagent:\n  mode: text\n"
        f"files:\n  parse_seconds: {parse_seconds}\n  max_parallel: {max_parallel}\n"
    )


def root(slack: FakeSlack, channel: str) -> Message | None:
    roots = slack.roots(channel)
    return roots[0] if roots else None


def first_at(message: Message | None, shown: str, *, live: bool | None = None) -> float | None:
    """When ``message`` first showed ``shown`` (with Stop, without, or either)."""
    if message is None:
        return None
    for at, text, blocks in message.versions:
        has_stop = STOP_ACTION_ID in json.dumps(blocks)
        if shown in text + json.dumps(blocks) and (live is None or live == has_stop):
            return at
    return None


def note_at(slack: FakeSlack, channel: str, words: str) -> float | None:
    for message in slack.messages.values():
        if message.channel == channel and words in message_text(message):
            return message.versions[0][0] if message.versions else None
    return None


async def wait(predicate: object, *, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        await asyncio.sleep(0.05)
    return False


async def plain_question(
    http: aiohttp.ClientSession, port: int, slack: FakeSlack, channel: str, ts: str
) -> float:
    """Seconds from a plain mention to its final answer (the fake's own record)."""
    sent = time.monotonic()
    await slack_event(http, port, f"Ev{channel}{ts}", mention(channel, "U7PLAIN", ts, "plain?"))
    await wait(lambda: first_at(root(slack, channel), "plain answer", live=False), within=60)
    done = first_at(root(slack, channel), "plain answer", live=False)
    return (done - sent) if done is not None else math.inf


async def measure(args: argparse.Namespace, home: Path) -> None:
    redis_url = os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/0")
    port = free_port()
    people = [f"U{n}PERSON" for n in range(1, args.people + 1)]
    channels = [f"C{n}BOMB" for n in range(1, args.people + 1)]
    async with (
        FakeSlack(token="xoxb-crowd") as slack,
        FakeOpenAI(model="m") as model,
        aiohttp.ClientSession() as http,
    ):
        for n in range(len(people)):
            model.reply(f"Thought: no file.\nFinal Answer: answer {n}", when=step(f"bomb {n}?", 0))
        for _ in range(2):
            model.reply("Thought: easy.\nFinal Answer: plain answer", when=step("plain?", 0))
        env = {
            "SLACK_BOT_TOKEN": slack.token,
            "SLACK_SIGNING_SECRET": SECRET,
            "REDIS_URL": redis_url,
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "sk-test",
        }
        settings = config(
            port, slack, parse_seconds=args.parse_seconds, max_parallel=args.max_parallel
        )
        process = await launch(home, settings, env, "--platform", "slack")
        try:
            await wait_for_http(f"http://127.0.0.1:{port}/healthz")
            idle = await plain_question(http, port, slack, "C8IDLE", "1800000000.000050")
            data = pdf_bomb(pages=args.pages)
            print(f"{args.people} PDF bombs of {args.pages} pages ({len(data):,} bytes each)")
            sent = time.monotonic()
            for n, (person, channel) in enumerate(zip(people, channels, strict=True)):
                event = mention(channel, person, f"1800000001.{n:06d}", f"bomb {n}?")
                event["files"] = [slack.add_file("bomb.pdf", data, mimetype="application/pdf")]
                await slack_event(http, port, f"EvBomb{n}", event)
            await asyncio.sleep(1.0)  # the first bombs are being read by now
            loaded = await plain_question(http, port, slack, "C9PLAIN", "1800000002.000100")
            bound = args.parse_seconds * math.ceil(args.people / args.max_parallel) + 10
            await wait(
                lambda: all(first_at(root(slack, c), "answer", live=False) for c in channels),
                within=bound + 30,
            )
            report(slack, channels, sent=sent, args=args, idle=idle, loaded=loaded)
            process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(20):
                await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await forget_keys(home)


def report(
    slack: FakeSlack,
    channels: list[str],
    *,
    sent: float,
    args: argparse.Namespace,
    idle: float,
    loaded: float,
) -> None:
    def since(at: float | None) -> str:
        return "never" if at is None else f"{at - sent:5.1f} s"

    answered: list[float] = []
    for n, channel in enumerate(channels):
        message = root(slack, channel)
        stop = first_at(message, "", live=True)
        waiting = first_at(message, FILES_QUEUED, live=True)
        skipped = note_at(slack, channel, SKIPPED)
        final = first_at(message, f"answer {n}", live=False)
        answered.append(math.inf if final is None else final - sent)
        print(
            f"  person {n + 1}: Stop shown {since(stop)}, 'waiting' shown {since(waiting)}, "
            f"skipped line {since(skipped)}, answered {since(final)}"
        )
    bound = args.parse_seconds * math.ceil(args.people / args.max_parallel) + 10
    first = min(answered)
    print(f"plain question from a 7th person: {idle:.2f} s idle, {loaded:.2f} s meanwhile")
    print(
        f"targets: all answered within {bound:g} s: {max(answered):.1f} s "
        f"({'met' if max(answered) <= bound else 'NOT met'}); the first within "
        f"{args.parse_seconds + 10:g} s: {first:.1f} s "
        f"({'met' if first <= args.parse_seconds + 10 else 'NOT met'}); plain question delayed "
        f"{loaded - idle:+.2f} s ({'met' if loaded - idle <= 1 else 'NOT met'})"
    )
    print(f"load average after: {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} cores")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--people", type=int, default=6)
    parser.add_argument("--pages", type=int, default=30)
    parser.add_argument("--parse-seconds", type=float, default=10.0)
    parser.add_argument("--max-parallel", type=int, default=2)
    parser.add_argument("--log", type=int, default=0, help="print the bot log's last N chars")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as home:
        try:
            asyncio.run(measure(args, Path(home)))
        finally:
            if args.log:
                print((Path(home) / "serve.log").read_text()[-args.log :])


if __name__ == "__main__":
    main()
