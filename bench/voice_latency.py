"""The latency a voice note adds to a run: the note downloaded (the shared ``Downloader``,
from a local file host), checked, uploaded through the real ``openai`` client to the speech
fake and its transcript taken, minus the time the endpoint itself takes (the fake waits
``--delay`` seconds, a realistic transcription of a short note). Target (issue 45): the
request itself plus less than 50 ms.

Run: ``PYTHONPATH=. .venv/bin/python bench/voice_latency.py [--rounds 30] [--delay 0.8]
[--kb 60]``. A first round warms the connection pool and the imports (a process's first note
pays for importing the ``openai`` client once); it prints the overhead (wall time minus the
delay) per round as min / median / p95 / max in ms, and the machine's load before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from aiohttp import web

from adapters.downloads import Downloader
from adapters.voice import Hearing
from core.speech import OpenAITranscriber
from tests.fakes.local_server import serve_locally
from tests.fakes.speech_server import FakeSpeech


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


async def main(rounds: int, delay: float, kb: int) -> None:
    note = b"OggS\x00\x02" + bytes(kb * 1024)

    async def host(request: web.Request) -> web.Response:
        return web.Response(body=note, content_type="audio/ogg")

    app = web.Application()
    app.router.add_get("/voice/{name}", host)
    runner, port = await serve_locally(app)
    base = f"http://127.0.0.1:{port}"
    downloader = Downloader(frozenset(), api_base_url=base, platform="the bench")
    incoming = downloader.incoming(
        "voice.oga", f"{base}/voice/voice.oga", size=len(note), content_type="audio/ogg", seconds=6
    )
    print(f"load before: {load()}; {rounds} rounds, endpoint delay {delay:g} s, note {kb} KB")
    async with FakeSpeech() as fake:
        transcriber = OpenAITranscriber("whisper-1", base_url=fake.base_url, api_key=fake.api_key)
        hearing = Hearing(transcriber, max_bytes=10 * 1024 * 1024)
        overheads: list[float] = []
        for number in range(rounds + 1):
            fake.transcript("What is the capital of France?", delay=delay)
            started = time.perf_counter()
            heard = await hearing.hear([incoming])
            took = time.perf_counter() - started
            assert not isinstance(heard, str), heard
            if number:  # round 0 warms up
                overheads.append((took - delay) * 1000)
        fake.assert_complete()
        await transcriber.aclose()
    await runner.cleanup()
    overheads.sort()
    p95 = overheads[min(len(overheads) - 1, int(len(overheads) * 0.95))]
    print(
        f"added beyond the request: min {overheads[0]:.1f} ms · median "
        f"{statistics.median(overheads):.1f} ms · p95 {p95:.1f} ms · max {overheads[-1]:.1f} ms"
        f" (target < 50 ms)"
    )
    print(f"load after: {load()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--delay", type=float, default=0.8)
    parser.add_argument("--kb", type=int, default=60, help="the note's size (60 KB: ~30 s of Opus)")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.delay, args.kb))
