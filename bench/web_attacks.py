"""Issue 47's attacks on the web chat, replayed against ``reactbot serve --platform web`` (the
real CLI, the offline demo model, on loopback only) with the figures they give.

Run: ``.venv/bin/python bench/web_attacks.py`` (about half a minute; every loop is bounded).

1. DNS rebinding, no ``REACTBOT_WEB_TOKEN``: ``GET /``, ``GET /api/events`` and ``POST
   /api/ask`` naming ``Host: evil.example:PORT`` (and that ``Origin``); then the same person's
   requests by the loopback name, which must still be answered.
4. Sign-in guessing with the token set: 400 wrong ``POST /signin`` at concurrency 200 from
   one address, and 5 more from each of 20 other loopback addresses.
5. Sessions: 10,050 ``GET /`` without a cookie from one address; then 20 from each of 520
   loopback addresses (10,400: past the 10,000 kept) while a person's stream is open, after
   which the person asks and the answer must arrive on that stream.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import aiohttp

TOKEN = "bench-token-0123456789abcdef"
ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Serving:
    """``reactbot serve --platform web`` in a child process, its stderr kept in a file."""

    def __init__(self, *, token: str | None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.dir = tempfile.TemporaryDirectory()
        config = Path(self.dir.name) / "c.yaml"
        config.write_text(f"web:\n  port: {self.port}\nops:\n  enabled: false\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("REACTBOT_", "OPENAI"))}
        if token:
            env["REACTBOT_WEB_TOKEN"] = token
        self.log = Path(self.dir.name) / "stderr.txt"
        self._err = self.log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "--config", str(config), "serve", "--platform", "web"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self._err,
        )

    async def ready(self) -> None:
        async with aiohttp.ClientSession() as http:
            for _ in range(200):
                try:
                    async with http.get(self.url + "/favicon.ico") as response:
                        if response.status == 204:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError("the chat did not start: " + self.log.read_text()[-500:])

    def stop(self) -> str:
        self.proc.terminate()
        self.proc.wait(timeout=20)
        self._err.close()
        text = self.log.read_text()
        self.dir.cleanup()
        return text


def client(address: str = "127.0.0.1", limit: int = 100) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        cookie_jar=aiohttp.CookieJar(unsafe=True),
        connector=aiohttp.TCPConnector(local_addr=(address, 0), limit=limit),
    )


async def person(url: str) -> tuple[aiohttp.ClientSession, str, aiohttp.ClientResponse]:
    """A browser on the page, its event stream open."""
    http = client()
    async with http.get(url + "/") as page:
        found = re.search(r'name="csrf-token" content="([0-9a-f]{64})"', await page.text())
        assert found is not None, page.status
    stream = await http.get(url + "/api/events")
    return http, found.group(1), stream


async def ask_and_wait(
    http: aiohttp.ClientSession, url: str, csrf: str, stream: aiohttp.ClientResponse
) -> str:
    headers = {"X-CSRF-Token": csrf, "Origin": url}
    async with http.post(url + "/api/ask", json={"question": "What is 2+2?"}, headers=headers) as r:
        if r.status != 202:
            return f"ask refused {r.status}"
    try:
        async with asyncio.timeout(20):
            while True:
                line = (await stream.content.readline()).decode()
                if not line:
                    return "stream ended without the answer"
                if line.startswith("data: ") and json.loads(line[6:]).get("final"):
                    return "answer arrived on the open stream"
    except TimeoutError:
        return "no answer on the open stream within 20 s"


async def rebinding() -> None:
    served = Serving(token=None)
    await served.ready()
    evil = f"evil.example:{served.port}"
    try:
        async with client() as attacker:
            async with attacker.get(served.url + "/", headers={"Host": evil}) as page:
                print(
                    f"  GET / Host {evil}: {page.status}, cookie set: {'Set-Cookie' in page.headers}"
                )
            async with attacker.get(served.url + "/api/events", headers={"Host": evil}) as events:
                print(f"  GET /api/events Host {evil}: {events.status}")
            headers = {"Host": evil, "Origin": f"http://{evil}", "X-CSRF-Token": "0" * 64}
            async with attacker.post(
                served.url + "/api/ask", json={"question": "hi"}, headers=headers
            ) as asked:
                print(f"  POST /api/ask Host+Origin {evil}: {asked.status}")
        http, csrf, stream = await person(served.url)
        print(f"  the person by 127.0.0.1: {await ask_and_wait(http, served.url, csrf, stream)}")
        stream.close()
        await http.close()
        await sessions(served)
    finally:
        log = served.stop()
    print(
        "  log lines on limits:",
        [line for line in log.splitlines() if "within a minute" in line][:3],
    )


async def sessions(served: Serving) -> None:
    url = served.url
    http, csrf, stream = await person(url)
    statuses: Counter[int] = Counter()
    started = time.perf_counter()
    async with aiohttp.ClientSession(
        cookie_jar=aiohttp.DummyCookieJar(), connector=aiohttp.TCPConnector(limit=100)
    ) as attacker:

        async def visit() -> None:
            async with attacker.get(url + "/") as page:
                statuses[page.status] += 1

        for batch in range(0, 10_050, 500):
            await asyncio.gather(*(visit() for _ in range(min(500, 10_050 - batch))))
    took = time.perf_counter() - started
    print(f"5. 10,050 GET / from one address: {dict(statuses)} in {took:.1f} s")
    statuses.clear()
    started = time.perf_counter()
    gate = asyncio.Semaphore(40)

    async def from_address(n: int) -> None:
        async with gate:
            address = f"127.0.{1 + n // 250}.{1 + n % 250}"
            async with aiohttp.ClientSession(
                cookie_jar=aiohttp.DummyCookieJar(),
                connector=aiohttp.TCPConnector(local_addr=(address, 0)),
            ) as other:
                for _ in range(20):
                    async with other.get(url + "/") as page:
                        statuses[page.status] += 1

    await asyncio.gather(*(from_address(n) for n in range(520)))
    took = time.perf_counter() - started
    print(f"   20 GET / from each of 520 addresses: {dict(statuses)} in {took:.1f} s")
    print(f"   the person with the stream open: {await ask_and_wait(http, url, csrf, stream)}")
    stream.close()
    await http.close()


async def guessing() -> None:
    served = Serving(token=TOKEN)
    await served.ready()
    try:
        async with client(limit=200) as guesser:

            async def guess(i: int, http: aiohttp.ClientSession) -> int:
                async with http.post(
                    served.url + "/signin",
                    data={"token": f"guess-{i}"},
                    headers={"Origin": served.url},
                ) as response:
                    return response.status

            started = time.perf_counter()
            one = Counter(await asyncio.gather(*(guess(i, guesser) for i in range(400))))
            took = time.perf_counter() - started
            print(
                f"4. 400 wrong sign-ins at concurrency 200, one address: {dict(one)} in {took:.2f} s"
            )
        many: Counter[int] = Counter()
        for n in range(20):
            async with client(f"127.0.3.{n + 1}") as other:
                many.update(await asyncio.gather(*(guess(i, other) for i in range(5))))
        print(f"   5 wrong sign-ins from each of 20 more addresses: {dict(many)}")
    finally:
        log = served.stop()
    limits = [line for line in log.splitlines() if "within a minute" in line]
    print(f"   log lines on limits: {len(limits)}, e.g. {limits[:2]}")
    print(f"   the token or a guess in the log: {TOKEN in log or 'guess-' in log}")


async def main() -> None:
    print("1. DNS rebinding, no token")
    await rebinding()
    await guessing()


if __name__ == "__main__":
    asyncio.run(main())
