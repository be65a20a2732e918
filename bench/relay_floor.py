"""Relay floor: the least a process can spend relaying streamed answers to Slack, measured on
the soak's very workload, so the bot's own figures have a floor to be read against.

    scripts/with-redis .venv/bin/python -m bench.relay_floor [--conversations 80]
        [--minutes 2] [--chunk-interval 0.02] [--think 5]

The relay is bare: an aiohttp server takes Slack's ``/ask`` (HTTP mode, signed requests
not checked), acks at once, posts a placeholder with a Stop button, then asks the model
(``bench/realistic_model.py``, its own process, the soak's ``--reply realistic``) over one
``aiohttp`` session, reading each SSE line with one ``json.loads`` and adding the text up;
the message is edited once a second per channel at most (one edit in flight), and a reply
that ends in an ``Action:`` gets ``Observation: 395`` and the model is asked again, as a
ReAct loop would, until the answer, which is the last edit (the Stop button gone). No
parser, no trace, no store, no history, no telemetry: what is left is the HTTP both ways.

The people are the soak's (``bench/soak.py --drive slack``, a child process with the Slack
fake): one channel each, the next question once the answer is final, about ``--think``
seconds later. Printed: the soak's figures (runs, failures, latencies, loop lag, RSS), and
the relay's CPU seconds per answered question and per streamed chunk, with the load before
and after; set against ``bench/soak.py --platform slack --reply realistic`` at the same
``--conversations`` they say what the bot costs above the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import sys
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from bench.soak import BotFigures, _figures, free_port, report, rss_bytes, sample_lag

TOKEN = "xoxb-test"
EDIT_EVERY = 1.0
"""Seconds between two edits of one message, at least."""
MAX_STEPS = 5
SHOWN_CHARS = 3000
STOP = {
    "type": "actions",
    "elements": [
        {
            "type": "button",
            "text": {"type": "plain_text", "text": "Stop"},
            "action_id": "reactbot_stop",
            "value": "stop",
        }
    ],
}


@dataclass
class Counts:
    ended: int = 0
    chunks: int = 0
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


class Relay:
    def __init__(self, slack_url: str, model_url: str, session: aiohttp.ClientSession) -> None:
        self.slack_url = slack_url.rstrip("/")
        self.model_url = model_url.rstrip("/")
        self.session = session
        self.counts = Counts()
        self.headers = {"Authorization": f"Bearer {TOKEN}"}

    async def events(self, request: web.Request) -> web.Response:
        form = urllib.parse.parse_qs(await request.text())
        channel, question = form["channel_id"][0], form["text"][0]
        task = asyncio.create_task(self.answer(channel, question))
        self.counts.tasks.add(task)
        task.add_done_callback(self.counts.tasks.discard)
        return web.Response(text="")  # the ack: at once, empty

    async def slack(self, method: str, **args: Any) -> dict[str, Any]:
        async with self.session.post(
            f"{self.slack_url}/{method}", json=args, headers=self.headers
        ) as response:
            return dict(await response.json())

    async def answer(self, channel: str, question: str) -> None:
        posted = await self.slack("chat.postMessage", channel=channel, text="…", blocks=[STOP])
        message = Message(self, channel, str(posted["ts"]))
        messages: list[dict[str, str]] = [
            {"role": "system", "content": "Answer with Thought, Action, Answer."},
            {"role": "user", "content": question},
        ]
        text = ""
        for _ in range(MAX_STEPS):
            text = await self.stream(messages, message)
            if "\nAction:" not in text:
                break
            messages += [
                {"role": "assistant", "content": text},
                {"role": "user", "content": "Observation: 395"},
            ]
        await message.final(text)
        self.counts.ended += 1

    async def stream(self, messages: list[dict[str, str]], message: Message) -> str:
        body = {"model": "relay", "messages": messages, "stream": True}
        parts: list[str] = []
        async with self.session.post(f"{self.model_url}/chat/completions", json=body) as reply:
            async for line in reply.content:
                if not line.startswith(b"data: "):
                    continue
                data = line[6:].strip()
                if data == b"[DONE]":
                    break
                chunk = json.loads(data)
                self.counts.chunks += 1
                choices = chunk.get("choices") or ()
                piece = choices[0].get("delta", {}).get("content") if choices else None
                if piece:
                    parts.append(piece)
                    message.show(parts)
        return "".join(parts)


class Message:
    """One answer's message: edited at most once per ``EDIT_EVERY``, one edit in flight."""

    def __init__(self, relay: Relay, channel: str, ts: str) -> None:
        self.relay, self.channel, self.ts = relay, channel, ts
        self.last = 0.0
        self.editing: asyncio.Task[Any] | None = None

    def show(self, parts: list[str]) -> None:
        now = time.monotonic()
        if now - self.last < EDIT_EVERY or (self.editing and not self.editing.done()):
            return
        self.last = now
        text = "".join(parts)[-SHOWN_CHARS:]
        self.editing = asyncio.create_task(
            self.relay.slack("chat.update", channel=self.channel, ts=self.ts, text=text)
        )

    async def final(self, text: str) -> None:
        if self.editing is not None:
            with contextlib.suppress(Exception):
                await self.editing
        answer = text.rsplit("Answer:", 1)[-1].strip()[-SHOWN_CHARS:]
        await self.relay.slack(
            "chat.update", channel=self.channel, ts=self.ts, text=answer, blocks=[]
        )


async def healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


async def run(conversations: int, minutes: float, think: float, chunk_interval: float) -> None:
    seconds = minutes * 60
    port = free_port()
    driver = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.soak", "--drive", "slack",
        "--conversations", str(conversations), "--seconds", str(seconds),
        "--bot-port", str(port), "--think", str(think),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=256 * 2**20,
    )  # fmt: skip
    model = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.realistic_model", "--chunk-interval", str(chunk_interval),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert driver.stdout is not None and model.stdout is not None
    slack_url = json.loads(await driver.stdout.readline())["api_base_url"]
    model_url = json.loads(await model.stdout.readline())["base_url"]
    load_before = os.getloadavg()
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        relay = Relay(slack_url, model_url, session)
        app = web.Application()
        app.router.add_post("/slack/events", relay.events)
        app.router.add_get("/healthz", healthz)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
        figures = BotFigures()
        lag = asyncio.create_task(sample_lag(figures))
        try:
            started, cpu = time.monotonic(), time.process_time()
            await asyncio.sleep(seconds / 3)
            gc.collect()
            figures.rss_warm, figures.runs_warm = rss_bytes(), relay.counts.ended
            warm_cpu, warm_chunks = time.process_time(), relay.counts.chunks
            figures.cpu_warm, figures.wall_warm = warm_cpu, time.monotonic()
            await asyncio.sleep(max(0.0, started + seconds - time.monotonic()))
            figures.cpu_end, figures.wall_end = time.process_time(), time.monotonic()
            gc.collect()
            figures.rss_end, figures.runs_end = rss_bytes(), relay.counts.ended
            spent, chunks = time.process_time() - warm_cpu, relay.counts.chunks - warm_chunks
            line = await driver.stdout.readline()
            result = {
                **_figures("slack", conversations, minutes, figures, json.loads(line)),
                "think": think,
                "reply": "realistic (bare relay)",
                "load_before": load_before,
                "load_after": os.getloadavg(),
            }
            print(report(result).replace(" min, Redis,", " min, no store,", 1))
            runs = figures.runs_end - figures.runs_warm
            print(
                f"relay CPU once warm           {spent:.2f} s over {runs} answers and "
                f"{chunks:,} chunks: {spent / max(1, runs) * 1000:.1f} ms an answer, "
                f"{spent / max(1, chunks) * 1e6:.1f} µs a chunk (all of the run: "
                f"{time.process_time() - cpu:.2f} s)",
                flush=True,
            )
        finally:
            lag.cancel()
            for task in list(relay.counts.tasks):
                task.cancel()
            await runner.cleanup()
            for child in (driver, model):
                with contextlib.suppress(Exception):
                    await child.communicate(b"done\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--conversations", type=int, default=80)
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--think", type=float, default=5.0)
    parser.add_argument("--chunk-interval", type=float, default=0.02)
    args = parser.parse_args(argv)
    asyncio.run(run(args.conversations, args.minutes, args.think, args.chunk_interval))
    return 0


if __name__ == "__main__":
    sys.exit(main())
