"""A local fake of Discord that refuses what Discord refuses: the REST routes the bot uses
and a small JSON gateway, driven by the real discord.py client in tests.

REST (under ``/api/v10``): ``GET /gateway/bot``, ``GET /users/@me``,
``GET /oauth2/applications/@me``, ``PUT /applications/{app}/commands``, channel messages
(create, edit, and Get Channel Messages: ``limit`` 1-100, newest first, 403 50001 without
View Channel and no messages without Read Message History, from the bot's overwrites set by
``deny``), threads on a message, interaction callbacks and the interaction webhook
(original response, follow-ups). Every call is recorded with its time and the status it got.
JSON answers use exactly ``application/json``: discord.py decodes nothing else.

What it refuses, the way Discord does (sources in ``tests/fakes/discord_limits.py`` and below):

- a bot route without ``Authorization: Bot {token}``: 401 ``{"message": "401: Unauthorized",
  "code": 0}`` (discord.py's login turns it into ``LoginFailure``);
- message bodies over Discord's limits (content, embeds, components, files), empty messages and
  thread names outside 1-100 characters: 400 with code 50035 and the nested ``errors`` tree,
  or 50006 / 30015; with the IS_COMPONENTS_V2 flag, content or embeds beside it, more than 40
  components or 4,000 characters of text, and malformed components of types 1, 2, 9, 10, 13,
  14 and 17 (50035). The flag is kept once set; an edit's ``flags`` replace SUPPRESS_EMBEDS;
- an interaction callback later than ``interaction_callback_window`` (3 s) after the
  interaction was sent: 404 10062; a second callback: 400 40060; the interaction webhook once
  ``interaction_token_ttl`` (15 min) has passed, or when the token was never acknowledged in
  time: 401 ``{"message": "Invalid Webhook Token", "code": 50027}``
  (``interactions/receiving-and-responding.mdx``; the body as quoted in
  germanoeich/nirn-proxy#23);
- rate limits (``topics/rate-limits.mdx``): every answer carries ``X-RateLimit-Limit``,
  ``-Remaining``, ``-Reset``, ``-Reset-After`` and ``-Bucket`` for its bucket, so discord.py
  waits pre-emptively as it does against Discord. Message writes in a channel (create, edit,
  thread creation) share one bucket per channel, ``channel_limit`` requests per fixed window
  (Discord's buckets reset at ``X-RateLimit-Reset``; they are not sliding windows); other
  buckets are unlimited. A 429 has the JSON body with ``retry_after``, ``Retry-After`` (whole
  seconds, rounded up as in the docs' examples), ``X-RateLimit-Scope`` and a ``Via`` header,
  without which discord.py assumes a Cloudflare ban. ``rate_limit_global`` scripts the global
  limit (``X-RateLimit-Global``, scope ``global``, no bucket headers); interaction endpoints
  are not bound by it.
- scripted refusals: ``refuse_next`` (any status and body, e.g. a 400 50035 for one final
  edit) and ``refuse_threads`` (403 50013 Missing Permissions).

Gateway (``/gateway``, plain JSON text frames): HELLO; IDENTIFY -> READY with the guild
unavailable, then GUILD_CREATE (a wrong token closes with 4004; IDENTIFYs closer than
``identify_interval`` apart get INVALID_SESSION ``false``, as ``max_concurrency`` 1 would);
heartbeats are acknowledged. Each session numbers its own dispatches and keeps them, so a
RESUME on ``resume_gateway_url`` (``/resume-gateway``) replays what the client missed after its
``seq`` and then sends RESUMED; an unknown or invalidated session gets INVALID_SESSION
``false``. ``reconnect_request`` (op 7) and ``invalidate_session`` (op 9) are injected mid-run.
Closing with 1000/1001 ends a session; any other close leaves it resumable
(``events/gateway.mdx``). ``dispatch`` sends an event to every session.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import itertools
import json
import math
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.discord_limits import (
    ALREADY_ACKNOWLEDGED,
    INVALID_WEBHOOK_TOKEN,
    IS_COMPONENTS_V2,
    MISSING_PERMISSIONS,
    THREAD_EXISTS,
    UNAUTHORIZED,
    UNKNOWN_CHANNEL,
    UNKNOWN_INTERACTION,
    UNKNOWN_MESSAGE,
    Refusal,
    callback_refusal,
    message_refusal,
    refusal,
    thread_refusal,
)
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
DM_CHANNEL_BASE = 600000000000000000
"""A user's DM channel with the bot is this plus the user's id."""
TOKEN = "fake-token"
UNLIMITED = (1_000_000, 1.0)
"""The window of the buckets the fake does not limit: headers still say how much is left."""
LOADING = 1 << 7  # message flag of a deferred interaction response ("is thinking...")
SUPPRESS_EMBEDS = 1 << 2
EDITABLE_FLAGS = SUPPRESS_EMBEDS
"""The flags a message's author may set or clear after creation (resources/message.mdx,
Edit Message: SUPPRESS_EMBEDS can be set and unset; IS_COMPONENTS_V2 only set)."""
CREATE_FLAGS = SUPPRESS_EMBEDS | IS_COMPONENTS_V2

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


@dataclass
class RefusalRule:
    method: str
    path_part: str
    refusal: Refusal
    count: int | None
    """How many matching requests to refuse; None refuses every one."""
    when: Callable[[Any], bool] | None = None
    """Refuse only requests whose JSON body satisfies this."""

    def matches(self, method: str, path: str, body: Any) -> bool:
        if self.count == 0 or method != self.method or self.path_part not in path:
            return False
        return self.when is None or self.when(body)


@dataclass
class Window:
    """A fixed rate-limit window: ``limit`` requests, then none until ``seconds`` after the
    window's first request (how Discord's buckets reset)."""

    limit: int
    seconds: float
    started: float = -math.inf
    used: int = 0

    def take(self, now: float) -> float | None:
        """Count one request; None if allowed, else the seconds until the window resets."""
        if now >= self.started + self.seconds:
            self.started, self.used = now, 0
        if self.used >= self.limit:
            return self.reset_after(now)
        self.used += 1
        return None

    def reset_after(self, now: float) -> float:
        return max(0.0, self.started + self.seconds - now)


@dataclass
class InteractionToken:
    channel_id: int
    issued: float
    """When Discord sent the interaction: the callback window and the token's life start here."""
    acknowledged: bool = False
    original: int | None = None
    kind: int = 2
    """The interaction's type: 2 a command, 3 a component, 5 a modal submit."""


@dataclass
class GatewaySession:
    id: str
    shard: list[int]
    seq: int = 0
    frames: list[tuple[int, str]] = field(default_factory=list)
    ws: web.WebSocketResponse | None = None

    def frame(self, event: str, data: Any) -> str:
        self.seq += 1
        text = json.dumps({"op": 0, "t": event, "s": self.seq, "d": data})
        self.frames.append((self.seq, text))
        return text

    @property
    def live(self) -> bool:
        return self.ws is not None and not self.ws.closed


@dataclass(frozen=True, slots=True)
class CdnFile:
    data: bytes
    content_type: str


class Refused(Exception):
    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.body.get("message", ""))
        self.refusal = refusal


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
class ManualClock:
    """A clock that moves only when told: expiries are tested without waiting for them."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class FakeDiscord:
    """The fake's state. ``channels`` maps channel id -> channel JSON (text channels and threads)."""

    host: str = "127.0.0.1"
    port: int = 0
    token: str = TOKEN
    """The only bot token the fake accepts (REST ``Authorization: Bot ...`` and IDENTIFY)."""
    channel_limit: tuple[int, float] | None = None
    """``(n, seconds)``: a channel's message writes allowed per window (Discord's is about 5 per
    5 s); None leaves the channel bucket unlimited (its headers still count)."""
    interaction_token_ttl: float = 15 * 60.0
    interaction_callback_window: float = 3.0
    identify_interval: float = 5.0
    """Least time between IDENTIFYs (``max_concurrency`` 1 per 5 s); 0 disables the check."""
    guilds: tuple[int, ...] = (GUILD_ID,)
    """The guilds the bot is in. A session identified as shard ``[i, n]`` is sent only the
    guilds and guild events with ``(guild_id >> 22) % n == i``, and DMs only when ``i`` is 0,
    as Discord routes them; every channel but ``GUILD_ID``'s has no category."""
    recommended_shards: int = 1
    """The ``shards`` that ``GET /gateway/bot`` recommends."""
    clock: Callable[[], float] = time.monotonic
    """The fake's time (REST requests, interaction tokens): a test that needs minutes to pass
    hands in a clock it moves itself (``ManualClock``)."""
    calls: list[Call] = field(default_factory=list)
    messages: dict[int, Json] = field(default_factory=dict)
    members: dict[int, Json] = field(default_factory=dict)
    modals: list[Json] = field(default_factory=list)
    """Every modal the bot opened (interaction callback type 9), in order."""
    """Guild members found by ``GET /guilds/{guild}/members/{user}`` (``add_member``)."""
    channels: dict[int, Json] = field(default_factory=dict)
    rules: list[RateLimitRule] = field(default_factory=list)
    refusals: list[RefusalRule] = field(default_factory=list)
    rate_limited: int = 0
    """429s answered, global ones included."""
    globally_limited: int = 0
    created: list[int] = field(default_factory=list)
    """Ids of the messages the bot created, in order."""
    typing: list[int] = field(default_factory=list)
    """The channels the bot showed "is typing…" in (``POST /channels/{id}/typing``), in order."""
    identified: asyncio.Event = field(default_factory=asyncio.Event)
    identifies: int = 0
    resumes: list[tuple[str, int]] = field(default_factory=list)
    """``(gateway path, seq)`` of each successful RESUME."""
    sessions: dict[str, GatewaySession] = field(default_factory=dict)
    """Sessions that may still receive or resume: live ones and dropped resumable ones."""
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(700000000000000001))
    _session_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _last_identify: float = -math.inf
    _windows: dict[tuple[str, str], Window] = field(default_factory=dict)
    _global_armed: float | None = None
    _global_until: float = -math.inf
    _interactions: dict[str, InteractionToken] = field(default_factory=dict)
    _sockets: list[web.WebSocketResponse] = field(default_factory=list)
    _dispatches: set[asyncio.Task[None]] = field(default_factory=set)
    _runner: web.AppRunner | None = None
    files: dict[str, CdnFile] = field(default_factory=dict)
    """Attachments served on the fake's CDN path, by path (``add_attachment``)."""
    cdn_requests: list[str] = field(default_factory=list)
    """Paths of every CDN request, served or not."""

    # ---- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/resume-gateway", self._gateway)
        app.router.add_route("*", API + "/{tail:.*}", self._rest)
        app.router.add_get("/attachments/{tail:.*}", self._cdn)
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

    @property
    def resume_gateway_url(self) -> str:
        return f"ws://{self.host}:{self.port}/resume-gateway"

    def new_id(self) -> int:
        return next(self._ids)

    # ---- the guild ----------------------------------------------------------------------------
    def add_channel(
        self,
        channel_id: int,
        *,
        parent: int | None = CATEGORY_ID,
        name: str = "",
        guild: int = GUILD_ID,
    ) -> Json:
        data: Json = {
            "id": str(channel_id),
            "type": 0,
            "guild_id": str(guild),
            "name": name or f"channel-{channel_id}",
            "position": len(self.channels),
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": str(parent) if parent and guild == GUILD_ID else None,
            "topic": None,
            "last_message_id": None,
            "rate_limit_per_user": 0,
        }
        self.channels[channel_id] = data
        return data

    def add_thread(
        self, thread_id: int, *, parent: int = CHANNEL_ID, private: bool = False
    ) -> Json:
        """A thread in ``parent`` (type 12 when private), known to the guild at GUILD_CREATE."""
        data: Json = {
            "id": str(thread_id),
            "type": 12 if private else 11,
            "guild_id": str(GUILD_ID),
            "parent_id": str(parent),
            "name": f"thread-{thread_id}",
            "owner_id": "1001",
            "message_count": 0,
            "member_count": 1,
            "rate_limit_per_user": 0,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": EPOCH,
                "locked": False,
                **({"invitable": False} if private else {}),
            },
        }
        self.channels[thread_id] = data
        return data

    def add_member(self, user_id: int, name: str, *, roles: tuple[int, ...] = ()) -> None:
        """A guild member the bot's cache does not hold (no members intent): found only by
        ``GET /guilds/{guild}/members/{user}``, as a DM's author must be looked up."""
        self.members[user_id] = member(user_id, name, roles=roles)

    def guild_of(self, channel_id: int) -> int:
        """The guild a channel (or thread) is in; ``GUILD_ID`` for one the fake does not know."""
        known = self.channels.get(channel_id)
        return int(known["guild_id"]) if known and known.get("guild_id") else GUILD_ID

    def owns(self, session: GatewaySession, guild_id: int | None) -> bool:
        """Whether Discord would send this guild's events (None: a DM's) to ``session``."""
        shard, count = session.shard
        if count <= 1:
            return True
        return shard == 0 if guild_id is None else (guild_id >> 22) % count == shard

    def guild_payload(self, guild_id: int = GUILD_ID) -> Json:
        """GUILD_CREATE's payload: its channels and threads; the categories and the admins
        role are ``GUILD_ID``'s alone."""
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
            if guild_id == GUILD_ID
        ]
        texts = [
            c for c in self.channels.values() if c["type"] == 0 and c["guild_id"] == str(guild_id)
        ]
        roles = [
            {
                "id": str(guild_id),
                "name": "@everyone",
                "permissions": str(EVERYONE_PERMISSIONS),
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
        ][: 2 if guild_id == GUILD_ID else 1]
        return {
            "id": str(guild_id),
            "name": "fake guild" if guild_id == GUILD_ID else f"fake guild {guild_id}",
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
            "threads": [
                c
                for c in self.channels.values()
                if c["type"] in (11, 12) and c["guild_id"] == str(guild_id)
            ],
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

    @property
    def global_limit_ends(self) -> float:
        """When the last global rate limit ended (or ends), on the fake's clock (``Call.at``)."""
        return self._global_until

    def rate_limit_global(self, retry_after: float) -> None:
        """The next request bound by the global limit starts ``retry_after`` seconds in which
        every such request gets a global 429 (interaction endpoints are not bound by it)."""
        self._global_armed = retry_after

    def refuse_next(
        self,
        method: str,
        path_part: str,
        refusal: Refusal,
        *,
        count: int | None = 1,
        when: Callable[[Any], bool] | None = None,
    ) -> None:
        """Answer the next ``count`` matching requests (all of them if None) with ``refusal``."""
        self.refusals.append(RefusalRule(method, path_part, refusal, count, when))

    def refuse_threads(self) -> None:
        """The bot lacks Create Public Threads: every thread creation gets 403 50013."""
        self.refuse_next("POST", "/threads", MISSING_PERMISSIONS, count=None)

    async def dispatch(self, event: str, data: Json) -> None:
        """Send a dispatch to every session of the shard that owns its guild (every session,
        unsharded); one that is reconnecting gets it on RESUME."""
        guild = data.get("guild_id")
        for session in list(self.sessions.values()):
            if self.owns(session, int(guild) if guild is not None else None):
                await self._send_dispatch(session, event, data)

    async def dispatch_to(self, index: int, event: str, data: Json) -> None:
        """A dispatch for one session only (Discord routes each event to one shard), by the
        order the sessions identified in."""
        await self._send_dispatch(list(self.sessions.values())[index], event, data)

    async def reconnect_request(self) -> None:
        """Op 7 RECONNECT to every live session: the client should reconnect and RESUME."""
        await self._send_op({"op": 7, "d": None})

    async def invalidate_session(self, *, resumable: bool) -> None:
        """Op 9 INVALID_SESSION to every live session; ``resumable`` False ends them, so the
        client must IDENTIFY anew."""
        live = [s for s in self.sessions.values() if s.live]
        await self._send_op({"op": 9, "d": resumable})
        if not resumable:
            for session in live:
                self.sessions.pop(session.id, None)

    @property
    def live_sessions(self) -> list[GatewaySession]:
        return [s for s in self.sessions.values() if s.live]

    def original_response(self, token: str) -> int | None:
        """The id of an interaction's original response message, once its callback made it."""
        record = self._interactions.get(token)
        return record.original if record is not None else None

    def remember_interaction(self, payload: Json) -> None:
        """Kept for older tests: interaction payloads register their token when built."""
        self._interactions.setdefault(
            payload["token"], InteractionToken(int(payload["channel_id"]), self.clock())
        )

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
        dm: bool = False,
        attachments: list[Json] | None = None,
        reply_to: int | None = None,
        reply_ping: bool = True,
    ) -> Json:
        """A MESSAGE_CREATE payload in the fake guild (``<@bot>`` prepended when mentioning);
        ``dm``: a direct message instead (no guild, no member, the DM channel's id).
        ``reply_to``: a reply (type 19) to that stored message, with ``message_reference`` and
        ``referenced_message`` as the gateway sends them; ``reply_ping`` (the client's
        default) puts the replied-to author in ``mentions``."""
        mid = message_id or self.new_id()
        text = f"<@{BOT_ID}> {content}" if mention_bot else content
        if dm:
            self.messages[mid] = self._dm_message(mid, author_id, name, text)
            return self.messages[mid]
        data: Json = {
            "id": str(mid),
            "channel_id": str(channel_id),
            "guild_id": str(self.guild_of(channel_id)),
            "author": user(author_id, name, bot=bot),
            "member": {
                k: v for k, v in member(author_id, name, roles=roles).items() if k != "user"
            },
            "content": text,
            "timestamp": EPOCH,
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": _mentioned(text),
            "mention_roles": [],
            "attachments": attachments or [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
        }
        if reply_to is not None:
            replied = self.messages[reply_to]
            data["type"] = 19
            data["message_reference"] = {
                "type": 0,
                "message_id": str(reply_to),
                "channel_id": replied["channel_id"],
                "guild_id": str(GUILD_ID),
            }
            data["referenced_message"] = replied
            if reply_ping:
                data["mentions"] = [*data["mentions"], replied["author"]]
        self.messages[mid] = data
        return data

    def voice_message_create(
        self,
        audio: bytes,
        seconds: float,
        *,
        channel_id: int = CHANNEL_ID,
        author_id: int = 1001,
        name: str = "ada",
        dm: bool = False,
        reply_to: int | None = None,
    ) -> Json:
        """A voice message as Discord delivers it (discord-api-docs, "Voice Messages"): the
        message flag ``IS_VOICE_MESSAGE`` (1 << 13), no content (a voice message carries no
        text, so in a guild it cannot mention the bot: only a DM, a free-response channel or
        a reply reaches it), and one ``audio/ogg`` attachment ``voice-message.ogg`` with its
        ``duration_secs`` (a float) and ``waveform`` (base64 of at most 256 bytes), served
        on the fake's CDN."""
        if dm:
            channel_id = DM_CHANNEL_BASE + author_id
        attachment = self.add_attachment(
            "voice-message.ogg", audio, content_type="audio/ogg", channel_id=channel_id
        )
        attachment["duration_secs"] = float(seconds)
        attachment["waveform"] = base64.b64encode(bytes(range(0, 256, 4))).decode("ascii")
        attachment["flags"] = 0
        data = self.message_create(
            "",
            channel_id=channel_id,
            author_id=author_id,
            name=name,
            mention_bot=False,
            dm=dm,
            attachments=[attachment],
            reply_to=reply_to,
        )
        data["attachments"], data["flags"] = [attachment], 1 << 13
        return data

    def _dm_message(self, mid: int, author_id: int, name: str, text: str) -> Json:
        return {
            "id": str(mid),
            "channel_id": str(DM_CHANNEL_BASE + author_id),
            "author": user(author_id, name),
            "content": text,
            "timestamp": EPOCH,
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
        }

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
        subcommand: str | None = None,
        attachments: dict[str, Json] | None = None,
    ) -> Json:
        """An INTERACTION_CREATE payload for the slash command ``name`` (``/name subcommand``
        when given: the options then belong to the subcommand, type 1, as Discord nests them).
        ``attachments``: attachment options (type 11) by option name, each an attachment
        object (``add_attachment``); the option's value is its id, the object goes in
        ``data.resolved.attachments`` as Discord sends it."""
        given = [{"name": k, "type": 3, "value": v} for k, v in (options or {}).items()]
        given += [{"name": k, "type": 11, "value": a["id"]} for k, a in (attachments or {}).items()]
        data: Json = {
            "id": str(interaction_id or self.new_id()),
            "name": name,
            "type": 1,
            "options": given
            if subcommand is None
            else [{"name": subcommand, "type": 1, "options": given}],
        }
        if attachments:
            data["resolved"] = {"attachments": {a["id"]: a for a in attachments.values()}}
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

    def modal_submit(
        self,
        custom_id: str,
        values: dict[str, str],
        *,
        message_id: int | None = None,
        channel_id: int = CHANNEL_ID,
        author_id: int = 1001,
        user_name: str = "ada",
        roles: tuple[int, ...] = (),
    ) -> Json:
        """A MODAL_SUBMIT interaction (type 5) for the modal ``custom_id``: each value inside
        the Label it was asked in (``component`` of a type-18 component), as Discord sends."""
        components = [
            {
                "type": 18,
                "id": n,
                "component": {"type": 4, "id": n + 100, "custom_id": key, "value": value},
            }
            for n, (key, value) in enumerate(values.items(), 1)
        ]
        payload = self._interaction(
            5,
            {"custom_id": custom_id, "components": components},
            channel_id,
            author_id,
            user_name,
            roles,
            None,
        )
        if message_id is not None:
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
        self._interactions[f"token-{iid}"] = InteractionToken(channel_id, self.clock(), kind=kind)
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

    # ---- the CDN ---------------------------------------------------------------------------
    def add_attachment(
        self,
        filename: str,
        data: bytes,
        *,
        content_type: str = "application/octet-stream",
        declared_size: int | None = None,
        url: str | None = None,
        channel_id: int = CHANNEL_ID,
    ) -> Json:
        """An attachment object (as in a message's ``attachments``) whose ``url`` this fake
        serves on its own host, the way cdn.discordapp.com serves
        ``/attachments/{channel}/{id}/{filename}?ex=..&is=..&hm=..``. ``declared_size`` is
        what the object claims (a lie when it differs from the bytes); ``url`` points the
        object elsewhere (a foreign host) instead."""
        aid = self.new_id()
        path = f"/attachments/{channel_id}/{aid}/{filename}"
        self.files[path] = CdnFile(data, content_type)
        base = f"http://{self.host}:{self.port}"
        signed = f"{base}{path}?ex=65a1b2c3&is=65a06143&hm={'0' * 64}&"
        return {
            "id": str(aid),
            "filename": filename,
            "size": len(data) if declared_size is None else declared_size,
            "url": url or signed,
            "proxy_url": url or signed,
            "content_type": content_type,
        }

    async def _cdn(self, request: web.Request) -> web.StreamResponse:
        self.cdn_requests.append(request.path)
        found = self.files.get(request.path)
        if found is None:  # what the CDN answers for an unknown or expired attachment
            return web.Response(status=404, text="This content is no longer available.")
        return web.Response(body=found.data, content_type=found.content_type)

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
        session: GatewaySession | None = None
        try:
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                session = await self._on_gateway_message(ws, request.path, json.loads(msg.data))
                if session is None and ws.closed:
                    break
        finally:
            self._sockets.remove(ws)
            self._drop_socket(ws)
        return ws

    def _drop_socket(self, ws: web.WebSocketResponse) -> None:
        for session in list(self.sessions.values()):
            if session.ws is ws:
                session.ws = None
                if ws.close_code in (1000, 1001):  # a clean close ends the session
                    self.sessions.pop(session.id, None)

    async def _on_gateway_message(
        self, ws: web.WebSocketResponse, path: str, msg: Json
    ) -> GatewaySession | None:
        op, data = msg.get("op"), msg.get("d") or {}
        current = next((s for s in self.sessions.values() if s.ws is ws), None)
        if op == 1:
            await ws.send_str(json.dumps({"op": 11}))
        elif op in (2, 6) and data.get("token") != self.token:
            await ws.close(code=4004, message=b"Authentication failed.")
            return None
        elif op == 2:
            return await self._identify(ws, data)
        elif op == 6:
            return await self._resume(ws, path, data)
        return current

    async def _identify(self, ws: web.WebSocketResponse, data: Json) -> GatewaySession | None:
        now = time.monotonic()
        if now - self._last_identify < self.identify_interval:
            await ws.send_str(json.dumps({"op": 9, "d": False}))
            return None
        self._last_identify = now
        session = GatewaySession(
            f"fake-session-{next(self._session_ids)}", data.get("shard", [0, 1])
        )
        session.ws = ws
        self.sessions[session.id] = session
        owned = [g for g in self.guilds if self.owns(session, g)]
        ready = {
            "v": 10,
            "user": user(BOT_ID, "reactbot", bot=True),
            "guilds": [{"id": str(g), "unavailable": True} for g in owned],
            "session_id": session.id,
            "resume_gateway_url": self.resume_gateway_url,
            "shard": session.shard,
            "application": {"id": str(APP_ID), "flags": 0},
        }
        await ws.send_str(session.frame("READY", ready))
        for guild in owned:
            await ws.send_str(session.frame("GUILD_CREATE", self.guild_payload(guild)))
        self.identifies += 1
        self.identified.set()
        return session

    async def _resume(
        self, ws: web.WebSocketResponse, path: str, data: Json
    ) -> GatewaySession | None:
        session = self.sessions.get(str(data.get("session_id")))
        if session is None:
            await ws.send_str(json.dumps({"op": 9, "d": False}))
            return None
        seq = int(data.get("seq") or 0)
        if seq > session.seq:
            await ws.close(code=4007, message=b"Invalid seq.")
            return None
        session.ws = ws
        for number, text in session.frames:  # what the client missed, in order
            if number > seq:
                await ws.send_str(text)
        await ws.send_str(session.frame("RESUMED", {}))
        self.resumes.append((path, seq))
        return session

    async def _send_dispatch(self, session: GatewaySession, event: str, data: Json) -> None:
        if event == "INTERACTION_CREATE" and data.get("token") in self._interactions:
            self._interactions[data["token"]].issued = self.clock()  # sent now
        text = session.frame(event, data)
        if session.ws is not None and not session.ws.closed:
            with contextlib.suppress(ConnectionError):
                await session.ws.send_str(text)

    async def _send_op(self, payload: Json) -> None:
        for session in self.live_sessions:
            assert session.ws is not None
            with contextlib.suppress(ConnectionError):
                await session.ws.send_str(json.dumps(payload))

    # ---- REST -------------------------------------------------------------------------------
    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        body, files = await _read_body(request)
        if request.method == "GET" and not body:  # a GET's arguments are its query string
            body = dict(request.query)
        now = self.clock()
        response = self._answer(request, path, body, files, now)
        self.calls.append(Call(now, request.method, path, body, files, response.status))
        return response

    def _answer(
        self, request: web.Request, path: str, body: Any, files: tuple[str, ...], now: float
    ) -> web.Response:
        method, parts = request.method, path.strip("/").split("/")
        bot_route = parts[0] not in ("webhooks", "interactions")
        if bot_route and request.headers.get("Authorization") != f"Bot {self.token}":
            return _refused(UNAUTHORIZED)
        if bot_route and (wait := self._global_wait(now)) is not None:
            self.rate_limited += 1
            self.globally_limited += 1
            return _too_many_globally(wait)
        limited, headers = self._bucket(method, path, parts, now)
        if limited is not None:
            return limited
        try:
            self._refuse_if_scripted(method, path, body)
            self._check_interaction_token(parts, now)
            data = self._route(method, parts, body, files)
        except Refused as exc:
            return _refused(exc.refusal, headers)
        if data is NO_CONTENT:
            return web.Response(status=204, headers=headers)
        return _json(data, headers=headers)

    def _global_wait(self, now: float) -> float | None:
        if self._global_armed is not None:
            self._global_until, self._global_armed = now + self._global_armed, None
        return self._global_until - now if now < self._global_until else None

    def _bucket(
        self, method: str, path: str, parts: list[str], now: float
    ) -> tuple[web.Response | None, dict[str, str]]:
        """Count the request in its bucket: a 429 when over, else the headers to answer with."""
        name, major = bucket_of(method, parts)
        window = self._window(name, major)
        for rule in self.rules:
            if rule.count > 0 and rule.method == method and rule.path_part in path:
                rule.count -= 1
                self.rate_limited += 1
                headers = _bucket_headers(
                    name, window, now, remaining=0, reset_after=rule.retry_after
                )
                return _too_many(rule.retry_after, headers), {}
        wait = window.take(now)
        if wait is not None:
            self.rate_limited += 1
            headers = _bucket_headers(name, window, now, remaining=0, reset_after=wait)
            return _too_many(wait, headers), {}
        return None, _bucket_headers(name, window, now)

    def _window(self, name: str, major: str) -> Window:
        key = (name, major)
        if key not in self._windows:
            limit = self.channel_limit if name == CHANNEL_WRITES else None
            self._windows[key] = Window(*(limit or UNLIMITED))
        return self._windows[key]

    def _refuse_if_scripted(self, method: str, path: str, body: Any) -> None:
        for rule in self.refusals:
            if rule.matches(method, path, body):
                if rule.count is not None:
                    rule.count -= 1
                raise Refused(rule.refusal)

    def _check_interaction_token(self, parts: list[str], now: float) -> None:
        match parts:
            case ["interactions", _, token, "callback"]:
                record = self._interactions.get(token)
                if record is None or now - record.issued > self.interaction_callback_window:
                    raise Refused(UNKNOWN_INTERACTION)
                if record.acknowledged:
                    raise Refused(ALREADY_ACKNOWLEDGED)
            case ["webhooks", _, token, *_]:
                record = self._interactions.get(token)
                age = now - record.issued if record is not None else math.inf
                in_time = record is not None and (
                    record.acknowledged or age <= self.interaction_callback_window
                )
                if age >= self.interaction_token_ttl or not in_time:
                    raise Refused(INVALID_WEBHOOK_TOKEN)

    def _route(self, method: str, parts: list[str], body: Any, files: tuple[str, ...]) -> Any:
        match (method, parts):
            case ("GET", ["gateway", "bot"]):
                return {
                    "url": self.gateway_url,
                    "shards": self.recommended_shards,
                    "session_start_limit": {
                        "total": 1000,
                        "remaining": 1000,
                        "reset_after": 0,
                        "max_concurrency": 1,
                    },
                }
            case ("GET", ["users", "@me"]):
                return user(BOT_ID, "reactbot", bot=True)
            case ("GET", ["guilds", gid, "members", uid]):
                known = gid.isdigit() and int(gid) in self.guilds
                if not known or not uid.isdigit() or int(uid) not in self.members:
                    raise Refused(refusal(404, 10007, "Unknown Member"))
                return self.members[int(uid)]
            case ("GET", ["oauth2", "applications", "@me"]):
                return _application()
            case ("PUT", ["applications", _, "commands"]):
                return [
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
            case ("POST", ["channels", cid, "typing"]):  # Trigger Typing Indicator: 204
                if not cid.isdigit() or int(cid) not in self.channels:
                    raise Refused(UNKNOWN_CHANNEL)
                self.typing.append(int(cid))
                return NO_CONTENT
            case ("GET", ["channels", cid, "messages"]):
                return self._history(cid, body)
            case ("POST", ["channels", cid, "messages"]):
                _check(message_refusal(body, len(files)))
                flags = int(body.get("flags") or 0) & CREATE_FLAGS
                return self._new_message(int(cid), body, files, flags=flags)
            case ("PATCH", ["channels", _, "messages", mid]):
                return self._edit_message(self._message_id(mid), body, files)
            case ("POST", ["channels", cid, "messages", mid, "threads"]):
                _check(thread_refusal(body))
                return self._new_thread(int(cid), self._message_id(mid), body)
            case ("POST", ["interactions", iid, token, "callback"]):
                _check(callback_refusal(body, len(files)))
                return self._callback(iid, token, body, files)
            case ("POST", ["webhooks", _, token]):
                _check(message_refusal(body, len(files)))
                flags = int(body.get("flags") or 0) & CREATE_FLAGS
                channel = self._interactions[token].channel_id
                return self._new_message(channel, body, files, flags=flags)
            case ("GET", ["webhooks", _, token, "messages", "@original"]):
                return self.messages[self._original(token)]
            case ("PATCH", ["webhooks", _, token, "messages", "@original"]):
                return self._edit_message(self._original(token), body, files)
            case ("PATCH", ["webhooks", _, _, "messages", mid]):
                return self._edit_message(self._message_id(mid), body, files)
        raise Refused(refusal(404, 0, "404: Not Found"))

    def deny(self, channel_id: int, permissions: int) -> None:
        """Take ``permissions`` from the bot in ``channel_id`` (a member overwrite, as a
        server admin would set it; the guild's next GUILD_CREATE carries it)."""
        overwrites = self.channels[channel_id]["permission_overwrites"]
        overwrites.append({"id": str(BOT_ID), "type": 1, "allow": "0", "deny": str(permissions)})

    def restrict(self, channel_id: int) -> None:
        """Make ``channel_id`` one only some see, as a server admin does (support
        article "private channels"): @everyone loses VIEW_CHANNEL there, the bot keeps it
        (a member overwrite); the guild's next GUILD_CREATE carries both."""
        overwrites = self.channels[channel_id]["permission_overwrites"]
        overwrites.append({"id": str(GUILD_ID), "type": 0, "allow": "0", "deny": str(VIEW_CHANNEL)})
        overwrites.append({"id": str(BOT_ID), "type": 1, "allow": str(VIEW_CHANNEL), "deny": "0"})

    def _bot_permissions(self, channel_id: int) -> int:
        """The bot's permissions in a channel: @everyone's, then the channel's (a thread's
        parent's) overwrites for @everyone and for the bot (topics/permissions.mdx)."""
        channel = self.channels[channel_id]
        if channel["type"] in (11, 12) and channel.get("parent_id"):
            channel = self.channels.get(int(channel["parent_id"]), channel)
        allowed = EVERYONE_PERMISSIONS
        for kind, who in ((0, str(GUILD_ID)), (1, str(BOT_ID))):
            for o in channel.get("permission_overwrites", []):
                if o["type"] == kind and o["id"] == who:
                    allowed = (allowed & ~int(o["deny"])) | int(o["allow"])
        return allowed

    def _history(self, cid: str, query: Json) -> list[Json]:
        """Get Channel Messages (resources/message.mdx): newest first, ``limit`` 1-100
        (default 50), one of ``before``/``after``/``around``. Without VIEW_CHANNEL: 403 50001
        Missing Access; without READ_MESSAGE_HISTORY: "no messages will be returned"."""
        if not cid.isdigit() or int(cid) not in self.channels:
            raise Refused(UNKNOWN_CHANNEL)
        problems = history_query_problems(query)
        if problems:
            raise Refused(
                Refusal(400, {"message": "Invalid Form Body", "code": 50035, "errors": problems})
            )
        permissions = self._bot_permissions(int(cid))
        if not permissions & VIEW_CHANNEL:
            raise Refused(MISSING_ACCESS)
        if not permissions & READ_MESSAGE_HISTORY:
            return []
        found = [m for m in self.messages.values() if m.get("channel_id") == cid]
        found.sort(key=lambda m: int(m["id"]), reverse=True)
        if "before" in query:
            found = [m for m in found if int(m["id"]) < int(query["before"])]
        elif "after" in query:
            found = [m for m in found if int(m["id"]) > int(query["after"])]
        return found[: int(query.get("limit") or 50)]

    def _message_id(self, mid: str) -> int:
        if not mid.isdigit() or int(mid) not in self.messages:
            raise Refused(UNKNOWN_MESSAGE)
        return int(mid)

    def _new_message(
        self, channel_id: int, body: Json, files: tuple[str, ...], *, flags: int = 0
    ) -> Json:
        mid = self.new_id()
        data = _message(mid, channel_id, body, files, flags=flags)
        if channel_id in self.channels and self.channels[channel_id]["type"] != 11:
            data["guild_id"] = str(self.guild_of(channel_id))
        self.messages[mid] = data
        self.created.append(mid)
        return data

    def _edit_message(self, message_id: int, body: Json, files: tuple[str, ...]) -> Json:
        data = self.messages[message_id]
        _check(message_refusal(body, len(files), existing=data))
        for key in ("content", "components", "embeds"):
            if key in body:
                data[key] = body[key]
        if files:
            data["attachments"] = [_attachment(n) for n in files]
        flags = int(data.get("flags") or 0) & ~LOADING
        if "flags" in body:  # omitted, the flags stay as they are; V2 is never taken away
            asked = int(body["flags"] or 0)
            flags = (flags & ~EDITABLE_FLAGS) | (asked & (EDITABLE_FLAGS | IS_COMPONENTS_V2))
        if flags & IS_COMPONENTS_V2:  # an upgrade reset them (or the refusal above said so)
            data["content"], data["embeds"] = "", []
        data["flags"] = flags
        data["edited_timestamp"] = EPOCH
        return data

    def _new_thread(self, channel_id: int, message_id: int, body: Json) -> Json:
        if message_id in self.channels:  # Discord gives a thread on a message the message's id
            raise Refused(THREAD_EXISTS)
        thread = {
            "id": str(message_id),
            "type": 11,
            "guild_id": str(self.guild_of(channel_id)),
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
        # Discord tells the thread's creator too (events/gateway-events.mdx, Thread Create:
        # "newly_created" when it was just made), so the bot knows the thread is its own.
        task = asyncio.get_running_loop().create_task(
            self.dispatch("THREAD_CREATE", {**thread, "newly_created": True})
        )
        self._dispatches.add(task)
        task.add_done_callback(self._dispatches.discard)
        return thread

    def _callback(self, iid: str, token: str, body: Json, files: tuple[str, ...]) -> Json:
        """The initial response: a message (4), "thinking..." (5), or nothing visible yet."""
        record = self._interactions[token]
        record.acknowledged = True
        kind = body.get("type")
        if kind == 4:
            data = body.get("data") or {}
            flags = int(data.get("flags") or 0)
            record.original = int(
                self._new_message(record.channel_id, data, files, flags=flags)["id"]
            )
        elif kind == 5:
            made = self._new_message(record.channel_id, {"content": ""}, (), flags=LOADING)
            record.original = int(made["id"])
        elif kind == 9:
            if record.kind == 5:  # a modal cannot answer a modal
                raise Refused(refusal(400, 50035, "Invalid Form Body"))
            self.modals.append(body.get("data") or {})
        return {"interaction": {"id": iid, "type": 2}}

    def _original(self, token: str) -> int:
        original = self._interactions[token].original
        if original is None:  # no initial response yet: nothing to edit
            raise Refused(UNKNOWN_MESSAGE)
        return original


CHANNEL_WRITES = "channel message writes"


NO_CONTENT = object()
"""What a route returns for Discord's 204 No Content (an empty body)."""


VIEW_CHANNEL = 1 << 10
READ_MESSAGE_HISTORY = 1 << 16
EVERYONE_PERMISSIONS = VIEW_CHANNEL | (1 << 11) | READ_MESSAGE_HISTORY
"""View Channel, Send Messages and Read Message History: what a bot invited with them has."""
MISSING_ACCESS = refusal(403, 50001, "Missing Access")


def history_query_problems(query: Json) -> Json:
    """The ``errors`` tree of a Get Channel Messages query Discord refuses with 50035: a
    ``limit`` outside 1-100, a snowflake that is not one, or more than one of ``before``,
    ``after`` and ``around`` ("mutually exclusive, only one may be passed at a time")."""
    problems: Json = {}
    limit = query.get("limit")
    if limit is not None and (not str(limit).isdigit() or not 1 <= int(limit) <= 100):
        problems["limit"] = {
            "_errors": [
                {"code": "NUMBER_TYPE_MAX", "message": "int value should be between 1 and 100."}
            ]
        }
    anchors = [k for k in ("before", "after", "around") if k in query]
    for key in anchors:
        if not str(query[key]).isdigit():
            problems[key] = {
                "_errors": [{"code": "NUMBER_TYPE_COERCE", "message": "Value is not snowflake."}]
            }
    if len(anchors) > 1:
        problems["_errors"] = [
            {"code": "INVALID_FORM_BODY", "message": "before, after and around are exclusive."}
        ]
    return problems


def bucket_of(method: str, parts: list[str]) -> tuple[str, str]:
    """A request's rate-limit bucket and top-level resource (Discord's major parameter)."""
    match parts:
        case ["channels", channel, "typing"]:  # a route (and bucket) of its own
            return f"{method} typing", channel
        case ["channels", channel, *_] if method in ("POST", "PATCH"):
            return CHANNEL_WRITES, channel
        case ["channels", channel, *_]:
            return f"{method} channels", channel
        case ["webhooks", webhook, token, *_]:
            return f"{method} webhooks", f"{webhook}/{token}"
        case ["interactions", interaction, token, *_]:
            return "interaction callback", f"{interaction}/{token}"
    return f"{method} /{'/'.join(parts)}", ""


def _check(found: Refusal | None) -> None:
    if found is not None:
        raise Refused(found)


# ---- helpers ------------------------------------------------------------------------------


def _json(data: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # discord.py decodes JSON only when the content type is exactly application/json
    # (aiohttp's content_type= would append "; charset=utf-8")
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    return web.Response(body=json.dumps(data).encode(), status=status, headers=all_headers)


def _refused(found: Refusal, headers: dict[str, str] | None = None) -> web.Response:
    return _json(found.body, status=found.status, headers=headers)


def _bucket_headers(
    name: str,
    window: Window,
    now: float,
    *,
    remaining: int | None = None,
    reset_after: float | None = None,
) -> dict[str, str]:
    left = window.limit - window.used if remaining is None else remaining
    after = window.reset_after(now) if reset_after is None else reset_after
    return {
        "X-RateLimit-Limit": str(window.limit),
        "X-RateLimit-Remaining": str(left),
        "X-RateLimit-Reset": f"{time.time() + after:.3f}",
        "X-RateLimit-Reset-After": f"{after:.3f}",
        # a bucket's hash does not include the top-level resource
        "X-RateLimit-Bucket": hashlib.sha1(name.encode()).hexdigest()[:16],
    }


def _wait_of(retry_after: float) -> tuple[str, float]:
    """Discord's two forms of one wait: the ``Retry-After`` header in whole seconds, rounded
    up, and the body's exact float. Both come from one value rounded to milliseconds, so a
    float a hair above a whole second (``until - now``) cannot round the header up alone."""
    exact = round(retry_after, 3)
    return str(math.ceil(exact)), exact


def _too_many(retry_after: float, headers: dict[str, str]) -> web.Response:
    header, exact = _wait_of(retry_after)
    headers = {
        **headers,
        "Retry-After": header,
        "X-RateLimit-Scope": "user",
        "Via": "1.1 google",  # without it discord.py treats a 429 as a Cloudflare ban
    }
    body = {
        "message": "You are being rate limited.",
        "retry_after": exact,
        "global": False,
    }
    return _json(body, status=429, headers=headers)


def _too_many_globally(retry_after: float) -> web.Response:
    header, exact = _wait_of(retry_after)
    headers = {
        "Retry-After": header,
        "X-RateLimit-Global": "true",
        "X-RateLimit-Scope": "global",
        "Via": "1.1 google",
    }
    body = {
        "message": "You are being rate limited.",
        "retry_after": exact,
        "global": True,
    }
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


def _mentioned(text: str) -> list[Json]:
    """The users a message's content mentions (``<@id>``, ``<@!id>``), as Discord lists them
    in ``mentions``: each once, the bot as itself."""
    found: list[Json] = []
    for raw in dict.fromkeys(re.findall(r"<@!?([0-9]{15,20})>", text)):
        uid = int(raw)
        found.append(
            user(BOT_ID, "reactbot", bot=True) if uid == BOT_ID else user(uid, f"user{uid}")
        )
    return found


def _message(
    mid: int, channel_id: int, body: Json, files: tuple[str, ...], *, flags: int = 0
) -> Json:
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
        "flags": flags,
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
