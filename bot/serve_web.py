"""``reactbot serve --platform web``: the web chat on ``web.host:web.port``, with the trace
pages beside it (each answer links its own), until cancelled."""

from __future__ import annotations

import asyncio
import logging
import secrets
import sys
from urllib.parse import quote

from aiohttp import web

from adapters.attachments import ConversationFiles, carried
from adapters.web.chat import WebChat, WebSettings
from bot.app import App, PlatformLink
from bot.config import Config
from bot.policy import policy_for
from bot.web import LinkSigner, add_trace_pages

log = logging.getLogger(__name__)


def web_settings(config: Config) -> WebSettings:
    web_config, secrets_ = config.web, config.secrets
    token = secrets_.web_token.get_secret_value() if secrets_.web_token is not None else None
    return WebSettings(
        host=web_config.host,
        port=web_config.port,
        token=token,
        secure_cookie=web_config.secure_cookie,
        public_url=web_config.public_url,
        allowed_hosts=web_config.allowed_hosts,
        max_sessions_per_address=web_config.max_sessions_per_address,
    )


def page_signer(config: Config) -> tuple[bytes, LinkSigner]:
    """The key of sessions and trace links: ``REACTBOT_LINK_SECRET`` when set (sessions then
    outlive a restart), else one made for this process."""
    given = config.secrets.link_secret
    key = given.get_secret_value() if given is not None else secrets.token_hex(32)
    return key.encode(), LinkSigner(key, public_url=None, ttl=config.web.link_ttl)


def web_files(app: App) -> ConversationFiles | None:
    """The intake of files attached in the page (None: ``files.enabled`` is false)."""
    if not app.config.files.enabled:
        return None
    return carried(app.stores.files, app.file_limits(), app.file_readers, platform="the web chat")


def build_chat(app: App) -> tuple[WebChat, web.Application]:
    key, signer = page_signer(app.config)

    def trace_link(trace_id: str) -> str:
        return f"/t/{quote(trace_id, safe='')}?{signer.query(trace_id)}"

    chat = WebChat(
        app.agent,
        stores=app.stores,
        budgets=app.budgets,
        choices=app.channel_choices(),
        settings=web_settings(app.config),
        policy=policy_for(app.config, "web"),
        broker=app.broker,
        secret=key,
        trace_link=trace_link,
        room=app.room,
        files=web_files(app),
    )
    web_app = chat.application()
    add_trace_pages(web_app, traces=app.stores.traces, signer=signer)
    return chat, web_app


async def serve_web(app: App) -> None:
    chat, web_app = build_chat(app)
    runner = web.AppRunner(web_app, access_log=None, handle_signals=False)
    await runner.setup()
    settings = chat.settings
    try:
        site = web.TCPSite(runner, settings.host, settings.port)
        await site.start()
        print(f"web chat: open {chat_url(app.config)}", file=sys.stderr, flush=True)
        app.platforms["web"] = PlatformLink(
            connected=_listening, edits=lambda: chat.pacer.stats.edits, rate_limited=lambda: 0
        )
        await asyncio.Event().wait()  # until cancelled
    finally:
        await runner.cleanup()  # runs still going end as stopped, then the sockets close


def chat_url(config: Config) -> str:
    """Where a person opens the chat: ``web.public_url`` when set, else the address it listens
    on (the loopback one for every address: a wildcard is no name a browser may use, and the
    chat answers only the names in ``adapters.web.hosts``)."""
    if config.web.public_url:
        return config.web.public_url.rstrip("/") + "/"
    host = config.web.host
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{config.web.port}/"


async def _listening() -> bool:
    return True
