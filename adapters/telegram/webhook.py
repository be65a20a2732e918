"""Webhook mode: Telegram posts each update to ``telegram.webhook_url``; this server takes
them on ``telegram.port``.

A request must carry the secret Telegram was given in ``setWebhook``
(``X-Telegram-Bot-Api-Secret-Token``, compared in constant time), else 403. Telegram retries
an update whose request did not answer 2xx in time, and several processes may serve one bot
behind a balancer, so each ``update_id`` is claimed in the shared store (``stores.claims``,
on Redis across processes) before it is handled: a retry, or the same update at a second
process, answers 200 and does nothing. An update is put on the ``Application``'s queue and
answered at once; the answer runs in its own task.

The secret is derived from the bot token (an HMAC), so every replica computes the same one
with no extra setting, and it is never the token itself.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from urllib.parse import urlsplit

from aiohttp import web
from telegram import Update

from adapters.telegram.bot import TelegramBot

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
BODY_BYTES = 1024 * 1024
"""An update is a few kilobytes; a bigger body is not Telegram's."""


def webhook_secret(token: str) -> str:
    """The ``secret_token`` for ``setWebhook`` (``A-Za-z0-9_-``, 64 characters)."""
    return hmac.new(token.encode(), b"reactbot telegram webhook", hashlib.sha256).hexdigest()


def webhook_path(url: str) -> str:
    return urlsplit(url).path or "/"


class WebhookServer:
    """The route Telegram posts to, over one ``TelegramBot`` (started by its owner)."""

    def __init__(self, bot: TelegramBot, *, path: str, secret: str) -> None:
        self.bot = bot
        self.path = path
        self._secret = secret.encode()
        self.duplicates = 0
        """Updates already claimed (Telegram's retries, another process's)."""

    def application(self) -> web.Application:
        app = web.Application(client_max_size=BODY_BYTES)
        app.router.add_post(self.path, self.receive)
        return app

    async def receive(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(given, self._secret):
            return web.Response(status=403, text="wrong secret token")
        try:
            data = await request.json()
        except ValueError:
            data = None
        update_id = data.get("update_id") if isinstance(data, dict) else None
        if not isinstance(update_id, int):
            return web.Response(status=400, text="not an update")
        if not await self.bot.stores.claims.claim(f"telegram:update:{update_id}"):
            self.duplicates += 1
            return web.Response(status=200)
        app = self.bot.application
        update = Update.de_json(data, app.bot)
        await app.update_queue.put(update)
        return web.Response(status=200)
