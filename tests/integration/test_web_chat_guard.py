# ruff: noqa: F811 - the fixtures are imported from test_web_chat and requested by name
"""Issue 47's attacks on the web chat, replayed over real HTTP: DNS rebinding (a foreign
``Host`` and ``Origin``), sign-in guessing in parallel and from many addresses, and one client
opening sessions until everyone's live ones are evicted. Each is refused or bounded; the
legitimate requests beside them still work."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
import pytest

from tests.integration.test_web_chat import (  # noqa: F401 - fixtures used by name
    CALC,
    Chat,
    Events,
    _csrf,
    events,
    make,
)

TOKEN = "s3cret-token"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def client(address: str = "127.0.0.1") -> aiohttp.ClientSession:
    """A browser of its own (no cookie yet) at one loopback address."""
    return aiohttp.ClientSession(
        cookie_jar=aiohttp.CookieJar(unsafe=True),
        connector=aiohttp.TCPConnector(local_addr=(address, 0)),
    )


async def raw(port: int, head: str) -> int:
    """The status of one HTTP/1.0 request written byte for byte (no client adds a Host)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head.encode())
    await writer.drain()
    async with asyncio.timeout(5):
        data = await reader.read()
    writer.close()
    return int(data.split(b" ", 2)[1])


# ---- hosts (DNS rebinding) ------------------------------------------------------------------


async def test_rebinding_requests_are_refused_before_a_session_exists(make: Any) -> None:
    c: Chat = await make(CALC)
    port = int(c.url.rsplit(":", 1)[1])
    evil = f"evil.example:{port}"
    before = len(c.chat.sessions.all())
    async with client() as attacker, attacker.get(c.url + "/", headers={"Host": evil}) as page:
        assert page.status == 421
        assert "Set-Cookie" not in page.headers and "csrf-token" not in await page.text()
    assert len(c.chat.sessions.all()) == before  # no session was made for it
    # Even holding a real session's cookie and CSRF token, the foreign name is refused.
    async with c.http.get(c.url + "/api/events", headers={"Host": evil}) as stream:
        assert stream.status == 421
    for origin in (f"http://{evil}", c.url):
        asked = await c.post("/api/ask", {"question": "What is 2+2?"}, Host=evil, Origin=origin)
        assert asked == (421, {"error": "This server does not answer for that host name."})
    assert c.model.calls == []
    assert c.chat.trace_link is not None
    link = c.chat.trace_link("t1") or ""
    async with c.http.get(c.url + link, headers={"Host": evil}) as trace_page:
        assert trace_page.status == 421
    async with c.http.get(c.url + link) as trace_page:
        assert trace_page.status == 404  # its own name gets as far as the (empty) store
    # A page of another origin posting to the right name is refused too.
    assert (await c.post("/api/ask", {"question": "hi"}, Origin=f"http://{evil}"))[0] == 403
    assert (await c.post("/api/ask", {"question": "hi"}, Origin="null"))[0] == 403
    # Names that are not this server's, or not this port's, or malformed.
    for host in (
        f"127.0.0.1:{port + 1}",
        "127.0.0.1",
        f"localhost.evil.example:{port}",
        f"evil.example.:{port}",
        f"127.0.0.1.nip.io:{port}",
        f"user@127.0.0.1:{port}",
        "",
    ):
        async with c.http.get(c.url + "/api/history", headers={"Host": host}) as refused:
            assert refused.status == 421, host
    assert await raw(port, "GET / HTTP/1.0\r\n\r\n") == 421  # no Host at all
    two = f"GET / HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nHost: {evil}\r\n\r\n"
    assert await raw(port, two) in (400, 421)
    assert await raw(port, f"GET / HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n") == 200


async def test_the_loopback_names_in_any_case_still_work(make: Any, events: Any) -> None:
    c: Chat = await make(CALC)
    port = int(c.url.rsplit(":", 1)[1])
    for host in (f"localhost:{port}", f"LocalHost.:{port}", f"[::1]:{port}", f"[0::1]:{port}"):
        async with client() as browser, browser.get(c.url + "/", headers={"Host": host}) as page:
            assert page.status == 200, host
            assert "csrf-token" in await page.text()
    stream: Events = await events(c)
    host = f"localhost:{port}"
    assert await c.post(
        "/api/ask", {"question": "What is 17*23+4?"}, Host=host, Origin=f"http://{host}"
    ) == (202, {"ok": True})
    final = await stream.until(lambda d: bool(d.get("final")))
    assert final["answer"]["text"] == "17*23+4 = 395"


async def test_behind_a_proxy_the_public_host_and_the_allowed_hosts_are_answered(
    make: Any,
) -> None:
    c: Chat = await make(
        CALC, public_url="https://chat.example.com", allowed_hosts=("bot.internal:8443",)
    )
    public = {"Host": "chat.example.com", "Origin": "https://chat.example.com"}
    async with client() as browser:
        async with browser.get(c.url + "/", headers={"Host": "Chat.Example.COM"}) as page:
            assert page.status == 200
            csrf = _csrf(await page.text())
        async with browser.post(
            c.url + "/api/ask",
            json={"question": "What is 17*23+4?"},
            headers={**public, "X-CSRF-Token": csrf},
        ) as asked:
            assert asked.status == 202
        async with browser.get(c.url + "/", headers={"Host": "bot.internal:8443"}) as page:
            assert page.status == 200
        for host in ("bot.internal:9999", "bot.internal", "evil.example"):
            async with browser.get(c.url + "/", headers={"Host": host}) as refused:
                assert refused.status == 421, host
        async with browser.post(
            c.url + "/api/ask",
            json={"question": "hi"},
            headers={
                "Host": "chat.example.com",
                "Origin": "https://chat.example.com.evil.example",
                "X-CSRF-Token": csrf,
            },
        ) as foreign:
            assert foreign.status == 403


# ---- sign-in ---------------------------------------------------------------------------------


async def signin(http: aiohttp.ClientSession, url: str, token: str) -> tuple[int, str | None]:
    async with http.post(url + "/signin", data={"token": token}, headers={"Origin": url}) as r:
        return r.status, r.headers.get("Retry-After")


async def test_five_wrong_tokens_a_minute_are_checked_then_429(
    make: Any, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    c: Chat = await make(CALC, host="0.0.0.0", token=TOKEN, clock=clock)
    caplog.set_level(logging.WARNING)
    wrong = await asyncio.gather(*(signin(c.http, c.url, f"guess-{i}") for i in range(5)))
    assert [status for status, _ in wrong] == [403] * 5
    clock.now += 10
    assert await signin(c.http, c.url, "guess-5") == (429, "50")
    assert await signin(c.http, c.url, TOKEN) == (429, "50")  # not checked at all
    async with c.http.post(
        c.url + "/signin", data={"token": "x"}, headers={"Origin": c.url}
    ) as page:
        assert "Too many wrong tokens" in await page.text()
    logged = caplog.text
    assert "5 wrong tokens from 127.0.0.1 within a minute" in logged
    assert "guess-" not in logged and TOKEN not in logged
    clock.now += 51
    async with c.http.post(
        c.url + "/signin", data={"token": TOKEN}, headers={"Origin": c.url}
    ) as r:
        assert r.status == 200 and "csrf-token" in await r.text()  # followed the redirect


async def test_guessing_in_parallel_is_not_faster(make: Any) -> None:
    c: Chat = await make(CALC, host="0.0.0.0", token=TOKEN)
    connector = aiohttp.TCPConnector(limit=200)
    async with aiohttp.ClientSession(connector=connector) as http:
        statuses = await asyncio.gather(*(signin(http, c.url, f"g{i}") for i in range(200)))
    counted = {code: [s for s, _ in statuses].count(code) for code in (403, 429)}
    assert counted == {403: 5, 429: 195}
    assert all(retry is not None and 1 <= int(retry) <= 60 for s, retry in statuses if s == 429)


async def test_many_addresses_together_meet_the_global_cap(
    make: Any, caplog: pytest.LogCaptureFixture
) -> None:
    c: Chat = await make(CALC, host="0.0.0.0", token=TOKEN)
    caplog.set_level(logging.WARNING)
    addresses = [f"127.0.0.{n}" for n in range(2, 16)]  # 14 x 5 = 70 guesses tried
    sessions = [client(a) for a in addresses]
    try:
        tried = await asyncio.gather(
            *(signin(http, c.url, f"g{i}") for http in sessions for i in range(5))
        )
        async with client("127.0.0.16") as newcomer:
            late = await signin(newcomer, c.url, TOKEN)
    finally:
        for http in sessions:
            await http.close()
    assert [s for s, _ in tried].count(403) == 60  # SIGNIN_TRIES_ALL
    assert [s for s, _ in tried].count(429) == 10
    assert late[0] == 429
    assert "60 wrong tokens from all addresses within a minute" in caplog.text


# ---- sessions --------------------------------------------------------------------------------


async def new_page(url: str, address: str = "127.0.0.1") -> tuple[int, str | None]:
    async with client(address) as browser, browser.get(url + "/") as page:
        return page.status, page.headers.get("Retry-After")


async def test_one_address_opens_twenty_sessions_a_minute(make: Any) -> None:
    clock = Clock()
    c: Chat = await make(CALC, clock=clock)  # its own page was the first of 20
    made = [await new_page(c.url) for _ in range(19)]
    assert made == [(200, None)] * 19
    assert await new_page(c.url) == (429, "60")
    assert await new_page(c.url, "127.0.0.2") == (200, None)  # another address is not held up
    clock.now += 60.5
    assert await new_page(c.url) == (200, None)
    assert len(c.chat.sessions.all()) == 22


async def test_a_live_session_is_never_the_one_forgotten(make: Any, events: Any) -> None:
    c: Chat = await make(CALC, max_sessions=5, max_sessions_per_address=1_000)
    mine = c.chat.sessions.all()[0]
    stream: Events = await events(c)  # the person's open tab
    for _ in range(12):  # one client, twelve cookie-less visits
        assert (await new_page(c.url))[0] == 200
    kept = c.chat.sessions.all()
    assert len(kept) == 5 and mine in kept
    assert await c.ask("What is 17*23+4?") == (202, {"ok": True})
    final = await stream.until(lambda d: bool(d.get("final")))
    assert final["answer"]["text"] == "17*23+4 = 395"


async def test_when_every_session_kept_is_live_a_new_one_waits(make: Any, events: Any) -> None:
    c: Chat = await make(CALC, max_sessions=2, max_sessions_per_address=1_000)
    await events(c)
    other: Chat = Chat(c.chat, c.url, client(), "", c.model, [])
    try:
        async with other.http.get(c.url + "/") as page:
            assert page.status == 200
        await events(other)
        assert await new_page(c.url) == (503, "60")
        assert len(c.chat.sessions.all()) == 2
    finally:
        await other.http.close()
