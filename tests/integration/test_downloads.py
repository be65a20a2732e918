"""The attachment downloader over real HTTP: only platform hosts, redirects checked per hop,
the size limit enforced while reading, the token only where it belongs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from adapters.downloads import DISCORD_FILE_HOSTS, SLACK_FILE_HOSTS, Downloader
from core.files import FileRefused
from tests.fakes.local_server import serve_locally

MB = 1024 * 1024


@dataclass
class Server:
    """A tiny HTTP server recording every request (path, Authorization header)."""

    routes: dict[str, Callable[[], web.Response] | str] = field(default_factory=dict)
    seen: list[tuple[str, str | None]] = field(default_factory=list)
    port: int = 0
    runner: web.AppRunner | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((request.path, request.headers.get("Authorization")))
        route = self.routes.get(request.path)
        if route == "stream-big":  # no Content-Length at all: chunked, 3 MB
            response = web.StreamResponse()
            response.enable_chunked_encoding()
            await response.prepare(request)
            for _ in range(48):
                await response.write(b"x" * 65536)
            await response.write_eof()
            return response
        if route == "lying-length":  # says 100 bytes, sends 3 MB
            response = web.StreamResponse(headers={"Content-Length": "100"})
            await response.prepare(request)
            with contextlib.suppress(ConnectionError):
                await response.write(b"y" * (3 * MB))
            return response
        if route == "slow":
            await asyncio.sleep(2)
            return web.Response(text="late")
        if callable(route):
            return route()
        return web.Response(status=404)


@pytest.fixture
async def servers() -> AsyncIterator[tuple[Server, Server]]:
    platform, foreign = Server(), Server()
    for server in (platform, foreign):
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", server.handle)
        server.runner, server.port = await serve_locally(app)
    yield platform, foreign
    for server in (platform, foreign):
        assert server.runner is not None
        await server.runner.cleanup()


def discord(platform: Server, **kw: object) -> Downloader:
    return Downloader(
        DISCORD_FILE_HOSTS,
        api_base_url=f"{platform.base}/api/v10",
        max_bytes=kw.pop("max_bytes", MB),  # type: ignore[arg-type]
        platform="Discord",
        **kw,  # type: ignore[arg-type]
    )


async def test_a_file_on_the_platform_host_is_fetched(servers: tuple[Server, Server]) -> None:
    platform, _ = servers
    platform.routes["/attachments/1/2/a.txt"] = lambda: web.Response(text="hello")
    assert await discord(platform).fetch(
        f"{platform.base}/attachments/1/2/a.txt", name="a.txt"
    ) == (b"hello")
    assert platform.seen == [("/attachments/1/2/a.txt", None)]  # Discord: no token, ever


async def test_a_foreign_url_is_never_fetched(servers: tuple[Server, Server]) -> None:
    platform, foreign = servers
    with pytest.raises(FileRefused, match=r"^a\.txt: not downloaded, it is not on Discord's"):
        await discord(platform).fetch(f"{foreign.base}/a.txt", name="a.txt")
    assert foreign.seen == []


async def test_redirects_are_followed_only_within_the_hosts(
    servers: tuple[Server, Server],
) -> None:
    platform, foreign = servers
    platform.routes["/hop"] = lambda: web.Response(status=302, headers={"Location": "/final"})
    platform.routes["/final"] = lambda: web.Response(text="done")
    platform.routes["/away"] = lambda: web.Response(
        status=307, headers={"Location": f"{foreign.base}/steal"}
    )
    platform.routes["/loop"] = lambda: web.Response(status=301, headers={"Location": "/loop"})
    downloader = discord(platform)
    assert await downloader.fetch(f"{platform.base}/hop", name="f.txt") == b"done"
    with pytest.raises(FileRefused, match="redirected elsewhere"):
        await downloader.fetch(f"{platform.base}/away", name="f.txt")
    assert foreign.seen == []
    with pytest.raises(FileRefused, match="too many redirects"):
        await downloader.fetch(f"{platform.base}/loop", name="f.txt")
    assert len([p for p, _ in platform.seen if p == "/loop"]) == 6


async def test_the_size_limit_holds_whatever_the_headers_say(
    servers: tuple[Server, Server],
) -> None:
    platform, _ = servers
    platform.routes["/declared"] = lambda: web.Response(body=b"z" * (2 * MB))
    platform.routes["/chunked"] = "stream-big"
    platform.routes["/lie"] = "lying-length"
    downloader = discord(platform)
    for path in ("/declared", "/chunked"):
        with pytest.raises(FileRefused, match=r"^big.txt: larger than 1 MB\.$"):
            await downloader.fetch(f"{platform.base}{path}", name="big.txt")
    # A Content-Length smaller than the body: only the declared bytes are read.
    assert len(await downloader.fetch(f"{platform.base}/lie", name="lie.txt")) == 100


async def test_errors_and_timeouts_are_one_line(servers: tuple[Server, Server]) -> None:
    platform, _ = servers
    platform.routes["/slow"] = "slow"
    with pytest.raises(FileRefused, match=r"took longer than 0.3 s"):
        await discord(platform, timeout=0.3).fetch(f"{platform.base}/slow", name="s.txt")
    with pytest.raises(FileRefused, match=r"refused the download \(HTTP 404\)"):
        await discord(platform).fetch(f"{platform.base}/missing", name="m.txt")


async def test_the_token_goes_only_to_slack_hosts(servers: tuple[Server, Server]) -> None:
    platform, foreign = servers
    slack = Downloader(
        SLACK_FILE_HOSTS,
        api_base_url=f"{platform.base}/api/",
        token="xoxb-secret",
        token_hosts=SLACK_FILE_HOSTS,
        platform="Slack",
    )
    platform.routes["/files-pri/T1-F1/a.txt"] = lambda: web.Response(text="ok")
    platform.routes["/files-pri/T1-F2/b.txt"] = lambda: web.Response(
        status=302, headers={"Location": f"{foreign.base}/b.txt"}
    )
    assert await slack.fetch(f"{platform.base}/files-pri/T1-F1/a.txt", name="a.txt") == b"ok"
    assert platform.seen[-1] == ("/files-pri/T1-F1/a.txt", "Bearer xoxb-secret")
    with pytest.raises(FileRefused):
        await slack.fetch(f"{platform.base}/files-pri/T1-F2/b.txt", name="b.txt")
    assert foreign.seen == []  # the redirect off-host never reached it, token or not
    platform.routes["/files-pri/T1-F3/c.pdf"] = lambda: web.Response(
        text="<!DOCTYPE html><html>Sign in</html>", content_type="text/html"
    )
    with pytest.raises(FileRefused, match=r"sign-in page .* files:read scope"):
        await slack.fetch(f"{platform.base}/files-pri/T1-F3/c.pdf", name="c.pdf")
    assert slack._sends_token("https://files.slack.com/files-pri/T1-F1/a.txt")
    for url in (
        "http://files.slack.com/files-pri/x",  # plain HTTP: not a Slack host
        "https://files.slack.com.evil.example/x",
        "https://files.slack.com@evil.example/x",
        "https://cdn.discordapp.com/attachments/x",
        f"{foreign.base}/x",
    ):
        assert not slack._sends_token(url), url


def test_hosts_ip_literals_and_localhost() -> None:
    plain = Downloader(DISCORD_FILE_HOSTS)
    assert plain.allowed("https://cdn.discordapp.com/attachments/1/2/a.pdf?ex=1")
    assert plain.allowed("https://media.discordapp.net/attachments/1/2/a.png")
    for url in (
        "http://cdn.discordapp.com/a",  # not HTTPS
        "https://cdn.discordapp.com:8443/a",
        "https://127.0.0.1/a",
        "https://[::1]/a",
        "https://localhost/a",
        "https://169.254.169.254/latest/meta-data/",
        "https://evil.example/a",
        "file:///etc/passwd",
        "https://cdn.discordapp.com.evil.example/a",
        "not a url",
        "https://[bad/",
    ):
        assert not plain.allowed(url), url
    proxied = Downloader(DISCORD_FILE_HOSTS, api_base_url="http://127.0.0.1:8080/api/v10")
    assert proxied.allowed("http://127.0.0.1:8080/attachments/a")
    assert not proxied.allowed("http://127.0.0.1:8081/attachments/a")
    assert not proxied.allowed("https://127.0.0.1:8080/attachments/a")
