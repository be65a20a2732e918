"""Running the Slack bot: HTTP mode (Events API + commands on one path) or Socket Mode.

HTTP mode puts a guard in front of bolt: malformed ``X-Slack-Request-Timestamp`` or
``X-Slack-Signature`` headers get a 401. Stock slack-bolt 1.30 calls ``int()`` on the
timestamp inside its verification middleware and answers 500 to ``abc``; a 500 also makes
Slack retry. Well-formed headers still go through bolt's own signature check.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request

from adapters.slack.bot import SlackBot

log = logging.getLogger(__name__)

_TIMESTAMP = re.compile(r"^[0-9]{1,12}$")
_SIGNATURE = re.compile(r"^v0=[0-9a-f]{64}$")


def signature_headers_ok(headers: Mapping[str, str]) -> bool:
    """Both headers present and shaped like Slack's; the HMAC itself is bolt's job."""
    timestamp = headers.get("X-Slack-Request-Timestamp", "")
    signature = headers.get("X-Slack-Signature", "")
    return bool(_TIMESTAMP.match(timestamp) and _SIGNATURE.match(signature))


def build_web_app(bot: SlackBot, *, path: str = "/slack/events") -> web.Application:
    async def slack_events(request: web.Request) -> web.Response:
        if not signature_headers_ok(request.headers):
            return web.Response(status=401, text="invalid request")
        bolt_response = await bot.app.async_dispatch(await to_bolt_request(request))
        return await to_aiohttp_response(bolt_response)

    async def health(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    web_app = web.Application(client_max_size=1024 * 1024)
    web_app.router.add_post(path, slack_events)
    web_app.router.add_get("/healthz", health)
    return web_app


class HttpServer:
    """The aiohttp site serving ``bot``; ``start`` returns the bound port (0 picks a free one)."""

    def __init__(self, bot: SlackBot, *, host: str, port: int, path: str) -> None:
        self.bot = bot
        self.host = host
        self.port = port
        self._runner = web.AppRunner(build_web_app(bot, path=path), access_log=None)

    async def start(self) -> int:
        await self._runner.setup()
        # aiohttp's default backlog (128) drops SYNs in a burst and the client retries a
        # second later: a burst of Slack deliveries would see acks take > 1 s.
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024)
        await site.start()
        server = site._server  # aiohttp keeps the asyncio server here; it knows the real port
        sockets = getattr(server, "sockets", None) or ()
        self.port = int(sockets[0].getsockname()[1]) if sockets else self.port
        return self.port

    async def stop(self) -> None:
        await self._runner.cleanup()


async def run_http(bot: SlackBot) -> None:
    """Serve until cancelled; then stop taking requests and finish the bot's tasks."""
    s = bot.settings
    if not s.signing_secret:
        raise ValueError("HTTP mode needs the signing secret (SLACK_SIGNING_SECRET)")
    server = HttpServer(bot, host=s.host, port=s.port, path=s.path)
    try:
        await bot.start()
        port = await server.start()
        log.info("Slack HTTP mode: listening on %s:%d%s", s.host, port, s.path)
        bot.connection = _listening
        try:
            await asyncio.Event().wait()
        finally:
            bot.connection = None
            await server.stop()
    finally:
        await bot.aclose()


async def _listening() -> bool:
    return True  # the site is up for as long as this is set


async def run_socket(bot: SlackBot) -> None:
    """Socket Mode (no public URL): a websocket opened with the app-level token."""
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

    if not bot.settings.app_token:
        raise ValueError("Socket Mode needs the app-level token (SLACK_APP_TOKEN)")
    handler = AsyncSocketModeHandler(bot.app, bot.settings.app_token)
    try:
        await bot.start()
        await handler.connect_async()  # type: ignore[no-untyped-call]
        log.info("Slack Socket Mode: connected")
        bot.connection = handler.client.is_connected
        await asyncio.Event().wait()
    finally:
        bot.connection = None
        await handler.close_async()  # type: ignore[no-untyped-call]
        await bot.aclose()


async def run(bot: SlackBot) -> None:
    if bot.settings.mode == "http":
        await run_http(bot)
    else:
        await run_socket(bot)
