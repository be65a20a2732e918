"""The platforms' sections of the config: ``discord:``, ``slack:``, ``web:`` and
``telegram:`` (what is truly each platform's: ids, layout, its own limits; the policy keys
they share are read by ``bot.policy``)."""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from bot.config_base import Section, check_http_url


class DiscordConfig(Section):
    api_base_url: str | None = None
    edit_interval: float = Field(default=1.2, ge=0.2, le=60)
    verbosity: Literal["full", "compact", "answer"] = "full"
    layout: Literal["components", "text"] = "components"
    allowed_guilds: tuple[int, ...] = ()
    allowed_channels: tuple[int, ...] = ()
    allowed_roles: tuple[int, ...] = ()
    allowed_users: tuple[int, ...] = ()
    admin_users: tuple[int, ...] = ()
    admin_roles: tuple[int, ...] = ()
    allow_dms: bool = True
    cooldown_seconds: float = Field(default=5.0, ge=0, le=3600)
    shard_count: int | None = Field(default=None, ge=1, le=10_000)
    """The bot's shards in all; None: as many as Discord recommends, all in this process."""
    shard_ids: tuple[int, ...] | None = None
    """The shards this process runs (with ``shard_count``): N processes on one Redis split
    the shards between them, and Discord sends each guild's events to one shard."""
    reply_followups: bool = True
    """A reply to one of the bot's messages, or a message in a thread the bot opened,
    continues that conversation without a mention."""
    free_response_channels: tuple[int, ...] = ()
    """Channels (or thread parents) where every message is a question, no mention needed."""

    _http_url = field_validator("api_base_url")(check_http_url)

    @model_validator(mode="after")
    def _shards(self) -> DiscordConfig:
        if self.shard_ids is None:
            return self
        if self.shard_count is None:
            raise ValueError("discord.shard_ids needs discord.shard_count (the shards in all)")
        if not self.shard_ids or len(set(self.shard_ids)) != len(self.shard_ids):
            raise ValueError("discord.shard_ids lists each shard once, at least one")
        if any(not 0 <= i < self.shard_count for i in self.shard_ids):
            raise ValueError(f"discord.shard_ids are from 0 to {self.shard_count - 1}")
        return self

    @field_validator(
        "free_response_channels",
        "allowed_guilds",
        "allowed_channels",
        "allowed_roles",
        "allowed_users",
        "admin_users",
        "admin_roles",
    )
    @classmethod
    def _snowflakes(cls, ids: tuple[int, ...]) -> tuple[int, ...]:
        if any(i <= 0 for i in ids):
            raise ValueError("Discord ids are positive integers")
        return ids


class SuggestedPrompt(Section):
    """One of the prompts Slack's assistant surface offers in a new thread."""

    title: str = Field(min_length=1)
    message: str = Field(min_length=1)


class SlackConfig(Section):
    mode: Literal["socket", "http"] = "socket"
    port: int = Field(default=3000, ge=1, le=65535)
    api_base_url: str | None = None
    update_interval: float = Field(default=1.0, ge=0.2, le=60)
    verbosity: Literal["full", "compact", "answer"] = "full"
    workspace_updates_per_minute: float = Field(default=50.0, ge=0, le=10_000)
    allowed_channels: tuple[str, ...] = ()
    allowed_users: tuple[str, ...] = ()
    admin_users: tuple[str, ...] = ()
    cooldown_seconds: float = Field(default=5.0, ge=0, le=3600)
    thread_replies: bool = True
    """A message in the thread of one of the bot's answers continues that conversation
    without a mention (the ``message.*`` events and ``*:history`` scopes)."""
    free_response_channels: tuple[str, ...] = ()
    """Channel ids where every message is a question, no mention needed."""
    streaming: Literal["auto", "native", "update"] = "auto"
    """``native``: chat.startStream/appendStream/stopStream (a plan of task cards, the answer
    streamed); ``update``: one message edited with chat.update; ``auto``: native in DMs and
    assistant threads, chat.update in channels (where everyone must see the live message)."""
    use_native_streaming: bool | None = None
    """Deprecated: ``slack.streaming`` replaces it (true: ``native``, false: ``update``)."""
    suggested_prompts: tuple[SuggestedPrompt, ...] = Field(
        default=(  # valid as written: constructed, so that no validator is built at import
            SuggestedPrompt.model_construct(
                title="What can you do?", message="What can you do, and with which tools?"
            ),
            SuggestedPrompt.model_construct(title="Calculate", message="What is 17*23+4?"),
        ),
        max_length=4,
    )
    """Offered in a new thread of Slack's assistant surface ("up to four suggested prompts",
    https://docs.slack.dev/reference/methods/assistant.threads.setSuggestedPrompts)."""

    _http_url = field_validator("api_base_url")(check_http_url)

    @model_validator(mode="before")
    @classmethod
    def _renamed_streaming(cls, data: object) -> object:
        if isinstance(data, dict) and "use_native_streaming" in data and "streaming" in data:
            raise ValueError(
                "use_native_streaming is replaced by streaming (auto, native or update): "
                "remove use_native_streaming"
            )
        return data

    @property
    def streaming_mode(self) -> Literal["auto", "native", "update"]:
        """``streaming``, or what the deprecated ``use_native_streaming`` meant."""
        if self.use_native_streaming is None:
            return self.streaming
        return "native" if self.use_native_streaming else "update"

    @property
    def deprecations(self) -> list[str]:
        if self.use_native_streaming is None:
            return []
        value = "native" if self.use_native_streaming else "update"
        return [
            f"slack.use_native_streaming is deprecated: write slack.streaming: {value} "
            "(auto streams natively in DMs and assistant threads)"
        ]


class WebConfig(Section):
    """The trace pages (``/t/{trace_id}``), served by the ops endpoint's HTTP server, and the
    web chat (``chat``), served on its own address (``host``, ``port``) with its own pages."""

    enabled: bool = False
    chat: bool = False
    """Serve the web chat (``reactbot serve --platform web`` turns it on for that run)."""
    host: str = Field(default="127.0.0.1", min_length=1)
    """The chat's address; any address but loopback needs ``REACTBOT_WEB_TOKEN``."""
    port: int = Field(default=8080, ge=0, le=65535)
    verbosity: Literal["full", "compact", "answer"] = "full"
    cooldown_seconds: float = Field(default=3.0, ge=0, le=3600)
    """Seconds between two questions of one browser session."""
    secure_cookie: bool = False
    """Mark the session cookie ``Secure`` (set when the chat is reached over https)."""
    public_url: str | None = None
    """How people reach that server (``https://bot.example.com``): the base of the signed
    links posted in trace threads and printed by ``reactbot trace show``."""
    link_ttl: int = Field(default=7 * 86400, ge=60, le=366 * 86400)
    """Seconds a signed link stays valid."""
    allowed_hosts: tuple[str, ...] = ()
    """Host names the chat and the trace pages answer besides loopback and ``public_url``'s
    (``bot.example.com``, or ``bot.example.com:8443`` for that port only); a request naming
    any other gets 421 (DNS rebinding)."""
    max_sessions_per_address: int = Field(default=20, ge=1, le=10_000)
    """New chat sessions one client address may open in a minute (then 429)."""

    _http_url = field_validator("public_url")(check_http_url)

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, hosts: tuple[str, ...]) -> tuple[str, ...]:
        from adapters.web.hosts import parse_host

        for host in hosts:
            if parse_host(host) is None:
                raise ValueError(
                    f"{host!r} is not a host name: write bot.example.com or "
                    "bot.example.com:8443 (no scheme, no path)"
                )
        return hosts

    @field_validator("public_url")
    @classmethod
    def _plain_base(cls, value: str | None) -> str | None:
        # It starts every link posted in Discord and Slack: nothing there may be read as
        # markup (<, >, |), and a query or fragment would swallow the link's own.
        if value is None:
            return value
        if re.search(r"[\s<>|\"'`\\]", value):
            raise ValueError("must be a plain URL: no spaces, quotes, <, >, | or \\")
        parts = urlsplit(value)
        if not parts.hostname:
            raise ValueError("must name a host, e.g. https://bot.example.com")
        if parts.query or parts.fragment or "?" in value or "#" in value:
            raise ValueError("must not have a query (?) or fragment (#); a path is fine")
        return value


class TelegramConfig(Section):
    """Telegram (``reactbot serve --platform telegram``, ``TELEGRAM_BOT_TOKEN``): private
    chats, answered in one message edited live."""

    mode: Literal["polling", "webhook"] = "polling"
    """``polling`` (getUpdates, no public address needed) or ``webhook`` (Telegram posts
    each update to ``webhook_url``, which reaches this process's ``port``)."""
    webhook_url: str | None = None
    """The public https URL Telegram posts updates to (webhook mode); its path is served."""
    port: int = Field(default=8443, ge=1, le=65535)
    """The webhook server's port (webhook mode)."""
    api_base_url: str | None = None
    """The Bot API prefix the token is appended to; None: https://api.telegram.org/bot."""
    allowed_chats: tuple[int, ...] = ()
    """Chats (private chat id = the person's user id) that may ask; empty: every one."""
    admins: tuple[int, ...] = ()
    """User ids exempt from the cooldown, who may stop anyone's run."""
    verbosity: Literal["full", "compact", "answer"] = "full"
    cooldown_seconds: float = Field(default=5.0, ge=0, le=3600)
    """Seconds between two questions of one person."""

    _http_url = field_validator("api_base_url")(check_http_url)

    @field_validator("webhook_url")
    @classmethod
    def _https(cls, value: str | None) -> str | None:
        if value is not None and not (value.startswith("https://") and urlsplit(value).hostname):
            raise ValueError("must be an https:// URL with a host (Telegram posts only to https)")
        return value

    @model_validator(mode="after")
    def _webhook_has_url(self) -> TelegramConfig:
        if self.mode == "webhook" and self.webhook_url is None:
            raise ValueError(
                "mode webhook needs telegram.webhook_url (the public https URL Telegram "
                "posts to); or use mode: polling"
            )
        return self
