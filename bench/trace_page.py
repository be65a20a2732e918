"""How long a trace page takes to render and to serve, and how big it is.

Run: ``.venv/bin/python bench/trace_page.py``. Three traces: 12 steps with one 50 KB
observation (the browser test's), 50 steps of 2 KB observations, and 50 steps of 100 KB each
(5 MB of observations, beyond what a page shows whole per field). Render is
``render_trace`` alone (median of 20); serve is a signed GET over real HTTP to aiohttp's own
server on 127.0.0.1 (median of 20, the body read), link check and store read included.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from bot.web import LinkSigner, _environment, add_trace_pages, render_trace
from core.stores import InMemoryTraceStore
from core.trace import Trace, TraceStep

ROUNDS = 20


def make_trace(steps: int, observation: int, *, big_one: int | None = None) -> Trace:
    trace = Trace(question="What is the population of Tokyo divided by the area of France?")
    trace.started_at = 1_800_000_000.0
    for i in range(1, steps + 1):
        size = big_one if big_one is not None and i == 2 else observation
        trace.steps.append(
            TraceStep(
                index=i,
                thought=f"Step {i}: I need more <data>.",
                action="search",
                action_input=f"query {i}",
                observation=("row <td>&amp; 12345 " * (size // 20 + 1))[:size],
                started_at=trace.started_at + i,
                ended_at=trace.started_at + i + 0.5,
                prompt_tokens=400,
                completion_tokens=30,
            )
        )
    trace.ended_at = trace.started_at + steps + 1
    trace.answer, trace.status = "About 67 people per km².", "answered"
    return trace


async def main() -> None:
    cases = {
        "12 steps, one 50 KB observation": make_trace(12, 200, big_one=50 * 1024),
        "50 steps x 2 KB": make_trace(50, 2 * 1024),
        "50 steps x 100 KB": make_trace(50, 100 * 1024),
    }
    env = _environment()
    traces = InMemoryTraceStore(max_attachment_bytes=0)
    for trace in cases.values():
        await traces.save(trace)
    signer = LinkSigner("bench-secret-0123456789abcdef", public_url=None)
    app = web.Application()
    add_trace_pages(app, traces=traces, signer=signer)
    print(f"{'trace':<34} {'page KB':>8} {'render ms':>10} {'GET ms':>8}")
    async with TestServer(app, host="127.0.0.1") as server, aiohttp.ClientSession() as http:
        signer.public_url = str(server.make_url("")).rstrip("/")
        for name, trace in cases.items():
            renders = []
            for _ in range(ROUNDS):
                started = time.perf_counter()
                page = render_trace(env, trace, query="exp=1&sig=" + "0" * 64)
                renders.append(time.perf_counter() - started)
            link = signer.link(trace.id)
            assert link is not None
            gets = []
            for _ in range(ROUNDS):
                started = time.perf_counter()
                async with http.get(link) as response:
                    assert response.status == 200
                    await response.read()
                gets.append(time.perf_counter() - started)
            print(
                f"{name:<34} {len(page.encode()) / 1024:>8.0f} "
                f"{statistics.median(renders) * 1000:>10.1f} {statistics.median(gets) * 1000:>8.1f}"
            )


if __name__ == "__main__":
    asyncio.run(main())
