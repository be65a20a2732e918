"""A local fake of Discord: the REST routes the bot uses and a small JSON gateway.

REST (under ``/api/v10``): ``GET /gateway/bot``, ``GET /users/@me``,
``GET /oauth2/applications/@me``, ``PUT /applications/{app}/commands``, channel messages
(create, edit), threads on a message, interaction callbacks and the interaction webhook
(original response, follow-ups). Every call is recorded with its time; ``rate_limit_next``
makes the next matching calls answer 429 the way Discord does (JSON body with
``retry_after``, ``X-RateLimit-*`` headers and a ``Via`` header, without which discord.py
assumes a Cloudflare ban). JSON answers use exactly ``application/json``: discord.py decodes
nothing else.

Gateway (``/gateway``, plain JSON text frames): HELLO, IDENTIFY -> READY with the guild
unavailable, then GUILD_CREATE; heartbeats are acknowledged. ``dispatch`` injects any event
(MESSAGE_CREATE, INTERACTION_CREATE) into every connected session.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.local_server import serve_locally

API = "/api/v10"
BOT_ID = 900000000000000001
APP_ID = 900000000000000002
GUILD_ID = 800000000000000001
CATEGORY_ID = 800000000000000002
CHANNEL_ID = 800000000000000003
OTHER_CATEGORY_ID = 800000000000000004
ROLE_ID = 800000000000000005
EPOCH = "2024-01-01T00:00:00+00:00"

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Call:
    at: float
    method: str
    path: str
    json: Any
    files: tuple[str, ...] = ()
    status: int = 200


@dataclass
class RateLimitRule:
    method: str
    path_part: str
    count: int
    retry_after: float


def user(user_id: int, name: str, *, bot: bool = False) -> Json:
    return {
        "id": str(user_id),
        "username": name,
        "global_name": name,
        "discriminator": "0",
        "avatar": None,
        "bot": bot,
    }


def member(user_id: int, name: str, *, roles: tuple[int, ...] = (), bot: bool = False) -> Json:
    return {
        "user": user(user_id, name, bot=bot),
        "roles": [str(r) for r in roles],
        "joined_at": EPOCH,
        "deaf": False,
        "mute": False,
        "flags": 0,
        "permissions": "0",
    }


@dataclass
class FakeDiscord:
    """The fake's state. ``channels`` maps channel id -> channel JSON (text channels and threads)."""

    host: str = "127.0.0.1"
    port: int = 0
    calls: list[Call] = field(default_factory=list)
    messages: dict[int, Json] = field(default_factory=dict)
    channels: dict[int, Json] = field(default_factory=dict)
    rules: list[RateLimitRule] = field(default_factory=list)
    rate_limited: int = 0
    channel_limit: tuple[int, float] | None = None
    """``(n, seconds)``: answer 429 to a channel's n+1-th message write within ``seconds``
    (Discord allows about 5 per 5 s per channel); None disables it."""
    _writes: dict[str, list[float]] = field(default_factory=dict)
    created: list[int] = field(default_factory=list)
    """Ids of the messages the bot created, in order."""
    identified: asyncio.Event = field(default_factory=asyncio.Event)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(700000000000000001))
    _sockets: list[web.WebSocketResponse] = field(default_factory=list)
    _seq: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _runner: web.AppRunner | None = None
    _on_call: list[Callable[[Call], None]] = field(default_factory=list)

    # ---- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/gateway", self._gateway)
        app.router.add_route("*", API + "/{tail:.*}", self._rest)
        self._runner, self.port = await serve_locally(
            app, host=self.host, port=self.port, shutdown_timeout=60.0
        )

    async def stop(self) -> None:
        for ws in list(self._sockets):
            with contextlib.suppress(Exception):
                await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_base_url(self) -> str:
        return f"http://{self.host}:{self.port}{API}"

    @property
    def gateway_url(self) -> str:
        return f"ws://{self.host}:{self.port}/gateway"

    def new_id(self) -> int:
        return next(self._ids)

    # ---- the guild ----------------------------------------------------------------------------
    def add_channel(
        self, channel_id: int, *, parent: int | None = CATEGORY_ID, name: str = ""
    ) -> Json:
        data: Json = {
            "id": str(channel_id),
            "type": 0,
            "guild_id": str(GUILD_ID),
            "name": name or f"channel-{channel_id}",
            "position": len(self.channels),
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": str(parent) if parent else None,
            "topic": None,
            "last_message_id": None,
            "rate_limit_per_user": 0,
        }
        self.channels[channel_id] = data
        return data

    def guild_payload(self) -> Json:
        categories: list[Json] = [
            {
                "id": str(c),
                "type": 4,
                "guild_id": str(GUILD_ID),
                "name": f"cat-{c}",
                "position": i,
                "permission_overwrites": [],
                "nsfw": False,
                "parent_id": None,
            }
            for i, c in enumerate((CATEGORY_ID, OTHER_CATEGORY_ID))
        ]
        texts = [c for c in self.channels.values() if c["type"] == 0]
        roles = [
            {
                "id": str(GUILD_ID),
                "name": "@everyone",
                "permissions": "3072",
                "position": 0,
                "color": 0,
                "hoist": False,
                "managed": False,
                "mentionable": False,
                "flags": 0,
            },
            {
                "id": str(ROLE_ID),
                "name": "admins",
                "permissions": "8",
                "position": 1,
                "color": 0,
                "hoist": False,
                "managed": False,
                "mentionable": True,
                "flags": 0,
            },
        ]
        return {
            "id": str(GUILD_ID),
            "name": "fake guild",
            "icon": None,
            "owner_id": "1",
            "unavailable": False,
            "member_count": 2,
            "large": False,
            "roles": roles,
            "emojis": [],
            "stickers": [],
            "features": [],
            "channels": categories + texts,
            "threads": [],
            "members": [member(BOT_ID, "reactbot", bot=True)],
            "voice_states": [],
            "presences": [],
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "mfa_level": 0,
            "nsfw_level": 0,
            "premium_tier": 0,
            "preferred_locale": "en-US",
            "afk_channel_id": None,
            "system_channel_id": None,
            "joined_at": EPOCH,
        }

    # ---- what tests do -------------------------------------------------------------------------
    def rate_limit_next(
        self, method: str, path_part: str, *, count: int = 1, retry_after: float = 0.5
    ) -> None:
        self.rules.append(RateLimitRule(method, path_part, count, retry_after))

    async def dispatch(self, event: str, data: Json) -> None:
        for ws in list(self._sockets):
            await ws.send_str(json.dumps({"op": 0, "t": event, "s": next(self._seq), "d": data}))

    def message_create(
        self,
        content: str,
        *,
        channel_id: int = CHANNEL_ID,
        author_id: int = 1001,
        name: str = "ada",
        roles: tuple[int, ...] = (),
        bot: bool = False,
        mention_bot: bool = True,
        message_id: int | None = None,
    ) -> Json:
        """A MESSAGE_CREATE payload in the fake guild (``<@bot>`` prepended when mentioning)."""
        mid = message_id or self.new_id()
        text = f"<@{BOT_ID}> {content}" if mention_bot else content
        data: Json = {
            "id": str(mid),
            "channel_id": str(channel_id),
            "guild_id": str(GUILD_ID),
            "author": user(author_id, name, bot=bot),
            "member": {
                k: v for k, v in member(author_id, name, roles=roles).items() if k != "user"
            },
            "content": text,
            "timestamp": EPOCH,
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [user(BOT_ID, "reactbot", bot=True)] if mention_bot else [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
        }
        self.messages[mid] = data
        return data

    def interaction_create(
        self,
        name: str,
        options: dict[str, str] | None = None,
        *,
        channel_id: int = CHANNEL_ID,
        author_id: int = 1001,
        user_name: str = "ada",
        roles: tuple[int, ...] = (),
        interaction_id: int | None = None,
    ) -> Json:
        """An INTERACTION_CREATE payload for the slash command ``name``."""
        data: Json = {
            "id": str(interaction_id or self.new_id()),
            "name": name,
            "type": 1,
            "options": [{"name": k, "type": 3, "value": v} for k, v in (options or {}).items()],
        }
        return self._interaction(2, data, channel_id, author_id, user_name, roles, interaction_id)

    def button_press(
        self,
        message_id: int,
        custom_id: str,
        *,
        channel_id: int = CHANNEL_ID,
        author_id: int = 1001,
        user_name: str = "ada",
        roles: tuple[int, ...] = (),
    ) -> Json:
        payload = self._interaction(
            3,
            {"custom_id": custom_id, "component_type": 2},
            channel_id,
            author_id,
            user_name,
            roles,
            None,
        )
        payload["message"] = self.messages[message_id]
        return payload

    def _interaction(
        self,
        kind: int,
        data: Json,
        channel_id: int,
        author_id: int,
        user_name: str,
        roles: tuple[int, ...],
        interaction_id: int | None,
    ) -> Json:
        iid = interaction_id or self.new_id()
        permissions = "8" if ROLE_ID in roles else "3072"
        return {
            "id": str(iid),
            "application_id": str(APP_ID),
            "type": kind,
            "data": data,
            "guild_id": str(GUILD_ID),
            "channel_id": str(channel_id),
            "channel": self.channels[channel_id],
            "member": {**member(author_id, user_name, roles=roles), "permissions": permissions},
            "token": f"token-{iid}",
            "version": 1,
            "app_permissions": "8",
            "locale": "en-US",
            "guild_locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": str(GUILD_ID)},
            "context": 0,
            "attachment_size_limit": 8 * 1024 * 1024,
        }

    def calls_to(self, method: str, path_part: str) -> list[Call]:
        return [c for c in self.calls if c.method == method and path_part in c.path]

    async def wait_for_call(
        self, predicate: Callable[[Call], bool], *, within: float = 5.0
    ) -> Call:
        return (await self.wait_for_calls(predicate, 1, within=within))[0]

    async def wait_for_calls(
        self, predicate: Callable[[Call], bool], count: int, *, within: float = 10.0
    ) -> list[Call]:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            found = [call for call in self.calls if predicate(call)]
            if len(found) >= count:
                return found
            await asyncio.sleep(0.01)
        raise TimeoutError("the expected Discord calls never came")

    # ---- gateway ----------------------------------------------------------------------------
    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.append(ws)
        await ws.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 45000}}))
        try:
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                await self._on_gateway_message(ws, json.loads(msg.data))
        finally:
            self._sockets.remove(ws)
        return ws

    async def _on_gateway_message(self, ws: web.WebSocketResponse, msg: Json) -> None:
        op = msg.get("op")
        if op == 1:
            await ws.send_str(json.dumps({"op": 11}))
        elif op == 2:
            shard = msg["d"].get("shard", [0, 1])
            ready = {
                "v": 10,
                "user": user(BOT_ID, "reactbot", bot=True),
                "guilds": [{"id": str(GUILD_ID), "unavailable": True}],
                "session_id": "fake-session",
                "resume_gateway_url": self.gateway_url,
                "shard": shard,
                "application": {"id": str(APP_ID), "flags": 0},
            }
            await ws.send_str(json.dumps({"op": 0, "t": "READY", "s": next(self._seq), "d": ready}))
            payload = {
                "op": 0,
                "t": "GUILD_CREATE",
                "s": next(self._seq),
                "d": self.guild_payload(),
            }
            await ws.send_str(json.dumps(payload))
            self.identified.set()

    # ---- REST -------------------------------------------------------------------------------
    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        body, files = await _read_body(request)
        limited = self._limited(request.method, path)
        status = 429 if limited is not None else 200
        self.calls.append(Call(time.monotonic(), request.method, path, body, files, status))
        if limited is not None:
            return _too_many(limited)
        try:
            return self._route(request.method, path, body, files)
        except KeyError as exc:
            return _json({"message": f"Unknown route or object {exc}", "code": 10003}, status=404)

    def _limited(self, method: str, path: str) -> float | None:
        over = self._over_channel_limit(method, path)
        if over is not None:
            self.rate_limited += 1
            return over
        for rule in self.rules:
            if rule.count > 0 and rule.method == method and rule.path_part in path:
                rule.count -= 1
                self.rate_limited += 1
                return rule.retry_after
        return None

    def _over_channel_limit(self, method: str, path: str) -> float | None:
        parts = path.strip("/").split("/")
        if self.channel_limit is None or method not in ("POST", "PATCH") or parts[0] != "channels":
            return None
        count, seconds = self.channel_limit
        now = time.monotonic()
        recent = [t for t in self._writes.get(parts[1], []) if now - t < seconds]
        if len(recent) >= count:
            self._writes[parts[1]] = recent
            return seconds - (now - recent[0])
        self._writes[parts[1]] = [*recent, now]
        return None

    def _route(self, method: str, path: str, body: Any, files: tuple[str, ...]) -> web.Response:
        parts = path.strip("/").split("/")
        match (method, parts):
            case ("GET", ["gateway", "bot"]):
                return _json(
                    {
                        "url": self.gateway_url,
                        "shards": 1,
                        "session_start_limit": {
                            "total": 1000,
                            "remaining": 1000,
                            "reset_after": 0,
                            "max_concurrency": 1,
                        },
                    }
                )
            case ("GET", ["users", "@me"]):
                return _json(user(BOT_ID, "reactbot", bot=True))
            case ("GET", ["oauth2", "applications", "@me"]):
                return _json(_application())
            case ("PUT", ["applications", _, "commands"]):
                return _json(
                    [
                        {
                            **c,
                            "id": str(self.new_id()),
                            "application_id": str(APP_ID),
                            "version": "1",
                            "default_member_permissions": None,
                            "type": c.get("type", 1),
                        }
                        for c in body
                    ]
                )
            case ("POST", ["channels", cid, "messages"]):
                return _json(self._new_message(int(cid), body, files))
            case ("PATCH", ["channels", cid, "messages", mid]):
                return _json(self._edit_message(int(mid), body, files))
            case ("POST", ["channels", cid, "messages", mid, "threads"]):
                return _json(self._new_thread(int(cid), int(mid), body))
            case ("POST", ["interactions", iid, _, "callback"]):
                return _json({"interaction": {"id": iid, "type": 2}})
            case ("POST", ["webhooks", _, token]):
                return _json(self._new_message(self._token_channel(token), body, files))
            case ("GET", ["webhooks", _, token, "messages", "@original"]):
                return _json(self.messages[self._original(token)])
            case ("PATCH", ["webhooks", _, token, "messages", "@original"]):
                return _json(self._edit_original(token, body, files))
            case ("PATCH", ["webhooks", _, _, "messages", mid]):
                return _json(self._edit_message(int(mid), body, files))
        return _json({"message": "404: Not Found", "code": 0}, status=404)

    def _new_message(self, channel_id: int, body: Json, files: tuple[str, ...]) -> Json:
        mid = self.new_id()
        data = _message(mid, channel_id, body, files)
        if channel_id in self.channels and self.channels[channel_id]["type"] != 11:
            data["guild_id"] = str(GUILD_ID)
        self.messages[mid] = data
        self.created.append(mid)
        return data

    def _edit_message(self, message_id: int, body: Json, files: tuple[str, ...]) -> Json:
        data = self.messages[message_id]
        for key in ("content", "components", "embeds"):
            if key in body:
                data[key] = body[key]
        if files:
            data["attachments"] = [_attachment(n) for n in files]
        data["edited_timestamp"] = EPOCH
        return data

    def _new_thread(self, channel_id: int, message_id: int, body: Json) -> Json:
        thread = {
            "id": str(message_id),  # Discord gives a thread on a message the message's id
            "type": 11,
            "guild_id": str(GUILD_ID),
            "parent_id": str(channel_id),
            "name": body.get("name", "thread"),
            "owner_id": str(BOT_ID),
            "message_count": 0,
            "member_count": 1,
            "rate_limit_per_user": 0,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": EPOCH,
                "locked": False,
            },
        }
        self.channels[message_id] = thread
        return thread

    # interaction tokens are "token-{interaction id}"; the original response lives per token
    _originals: dict[str, int] = field(default_factory=dict)
    _token_channels: dict[str, int] = field(default_factory=dict)

    def remember_interaction(self, payload: Json) -> None:
        self._token_channels[payload["token"]] = int(payload["channel_id"])

    def _token_channel(self, token: str) -> int:
        return self._token_channels.get(token, CHANNEL_ID)

    def _original(self, token: str) -> int:
        if token not in self._originals:
            created = self._new_message(self._token_channel(token), {"content": ""}, ())
            self._originals[token] = int(created["id"])
        return self._originals[token]

    def _edit_original(self, token: str, body: Json, files: tuple[str, ...]) -> Json:
        return self._edit_message(self._original(token), body, files)


# ---- helpers ------------------------------------------------------------------------------


def _json(data: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # discord.py decodes JSON only when the content type is exactly application/json
    # (aiohttp's content_type= would append "; charset=utf-8")
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    return web.Response(body=json.dumps(data).encode(), status=status, headers=all_headers)


def _too_many(retry_after: float) -> web.Response:
    headers = {
        "Retry-After": f"{retry_after:.3f}",
        "X-RateLimit-Limit": "5",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset-After": f"{retry_after:.3f}",
        "X-RateLimit-Bucket": "fake-bucket",
        "X-RateLimit-Scope": "user",
        "Via": "1.1 google",  # without it discord.py treats a 429 as a Cloudflare ban
    }
    body = {"message": "You are being rate limited.", "retry_after": retry_after, "global": False}
    return _json(body, status=429, headers=headers)


async def _read_body(request: web.Request) -> tuple[Any, tuple[str, ...]]:
    if request.content_type == "multipart/form-data":
        payload: Any = {}
        names: list[str] = []
        reader = await request.multipart()
        async for part in _parts(reader):
            if part.name == "payload_json":
                payload = json.loads(await part.text())
            else:
                await part.read()
                names.append(part.filename or part.name or "")
        return payload, tuple(names)
    if request.can_read_body:
        text = await request.text()
        return (json.loads(text) if text else {}), ()
    return {}, ()


async def _parts(reader: Any) -> AsyncIterator[Any]:
    while True:
        part = await reader.next()
        if part is None:
            return
        yield part


def _attachment(name: str) -> Json:
    return {
        "id": "1",
        "filename": name,
        "size": 1,
        "url": f"https://cdn.invalid/{name}",
        "proxy_url": f"https://cdn.invalid/{name}",
    }


def _message(mid: int, channel_id: int, body: Json, files: tuple[str, ...]) -> Json:
    return {
        "id": str(mid),
        "channel_id": str(channel_id),
        "author": user(BOT_ID, "reactbot", bot=True),
        "content": body.get("content") or "",
        "timestamp": EPOCH,
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": [],
        "mention_roles": [],
        "attachments": [_attachment(n) for n in files],
        "embeds": body.get("embeds") or [],
        "components": body.get("components") or [],
        "pinned": False,
        "type": 19 if body.get("message_reference") else 0,
        "flags": 0,
        **({"message_reference": ref} if (ref := body.get("message_reference")) else {}),
    }


def _application() -> Json:
    return {
        "id": str(APP_ID),
        "name": "reactbot",
        "icon": None,
        "description": "",
        "bot_public": True,
        "bot_require_code_grant": False,
        "owner": user(1, "owner"),
        "verify_key": "0" * 64,
        "flags": 0,
        "team": None,
        "summary": "",
        "rpc_origins": [],
    }
