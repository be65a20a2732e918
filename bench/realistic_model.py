"""An OpenAI-compatible model server for the soak: replies of the size and pace real models give.

    python -m bench.realistic_model [--port 0] [--chunk-interval 0.02] [--steps 3]

Every ``POST /v1/chat/completions`` is answered from the request itself, so any number of
conversations can share it in any order: while the run has had fewer than ``--steps``
Observations since its question, a thought of 200-400 characters and ``Action:
calculate[17*23+4]``; then an answer of 600-1,000 characters that ends with the result
(``395``). The text streams in chunks of 3-6 characters (mean about 4.6, as providers send
them), one SSE event each, ``--chunk-interval`` seconds apart, then a usage chunk when asked
for and ``[DONE]``: the wire format the ``openai`` SDK reads. The text is made of words from a
fixed seed, different for every reply. The first line it prints is ``{"base_url": ...}``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

from aiohttp import web

WORDS = [
    "the",
    "a",
    "result",
    "of",
    "this",
    "value",
    "product",
    "sum",
    "we",
    "need",
    "to",
    "compute",
    "first",
    "then",
    "add",
    "four",
    "multiply",
    "seventeen",
    "by",
    "twenty",
    "three",
    "which",
    "gives",
    "three",
    "hundred",
    "ninety",
    "one",
    "and",
    "so",
    "check",
    "it",
    "with",
    "calculator",
    "because",
    "arithmetic",
    "in",
    "text",
    "is",
    "easy",
    "to",
    "get",
    "wrong",
    "careful",
    "answer",
    "question",
    "number",
    "step",
    "tool",
    "observation",
    "confirms",
    "expected",
    "total",
    "final",
]


def prose(rng: random.Random, length: int) -> str:
    words: list[str] = []
    size = 0
    while size < length:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    sentence = " ".join(words)
    return sentence[0].upper() + sentence[1:length] + "."


def pieces(text: str, rng: random.Random) -> Iterator[str]:
    at = 0
    while at < len(text):
        size = rng.randint(3, 6)
        yield text[at : at + size]
        at += size


def observations_since_question(messages: Sequence[dict[str, Any]]) -> int:
    seen = 0
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        if not str(message.get("content", "")).startswith("Observation:"):
            break
        seen += 1
    return seen


class RealisticModel:
    def __init__(self, *, chunk_interval: float, steps: int) -> None:
        self.chunk_interval = chunk_interval
        self.steps = steps
        self.replies = itertools.count(1)
        self.streaming = 0

    def text_for(self, messages: Sequence[dict[str, Any]], rng: random.Random) -> str:
        if observations_since_question(messages) < self.steps:
            thought = prose(rng, rng.randint(200, 400))
            return f"Thought: {thought}\nAction: calculate[17*23+4]"
        answer = prose(rng, rng.randint(590, 990))
        return f"Thought: The calculator confirmed it.\nAnswer: {answer} The result is 395."

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        number = next(self.replies)
        rng = random.Random(number)
        text = self.text_for(body.get("messages", []), rng)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        base = {
            "id": f"chatcmpl-soak{number}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "soak"),
        }

        async def event(data: dict[str, Any]) -> None:
            await response.write(b"data: " + json.dumps(data).encode() + b"\n\n")

        self.streaming += 1
        try:
            first = {"index": 0, "delta": {"role": "assistant", "content": ""}}
            await event({**base, "choices": [{**first, "finish_reason": None}]})
            for piece in pieces(text, rng):
                await asyncio.sleep(self.chunk_interval)
                choice = {"index": 0, "delta": {"content": piece}, "finish_reason": None}
                await event({**base, "choices": [choice]})
            await event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            if (body.get("stream_options") or {}).get("include_usage"):
                usage = {"prompt_tokens": 900, "completion_tokens": len(text) // 4}
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                await event({**base, "choices": [], "usage": usage})
            await response.write(b"data: [DONE]\n\n")
        finally:
            self.streaming -= 1
        return response


async def serve(port: int, chunk_interval: float, steps: int) -> None:
    model = RealisticModel(chunk_interval=chunk_interval, steps=steps)
    app = web.Application()
    app.router.add_post("/v1/chat/completions", model.chat)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=4096)
    await site.start()
    bound = runner.addresses[0][1]
    sys.stdout.write(json.dumps({"base_url": f"http://127.0.0.1:{bound}/v1"}) + "\n")
    sys.stdout.flush()
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--chunk-interval", type=float, default=0.02)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args(argv)
    asyncio.run(serve(args.port, args.chunk_interval, args.steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
