"""The bot's configuration: one typed, frozen object, loaded once at start and passed down.

``load_config(path, env)`` reads an optional YAML file (``--config`` or ``REACTBOT_CONFIG``),
applies the environment overrides (``REACTBOT_MODEL``, ``OPENAI_BASE_URL``, ``REDIS_URL``, and
any key as ``REACTBOT_<SECTION>__<KEY>``, e.g. ``REACTBOT_WEB__ENABLED=true``), reads the
secrets from the environment only, and returns a ``Config``. With no file at all the
embedded defaults apply: the offline demo model, in-memory history, the terminal.

Every problem becomes a ``ConfigError`` whose message names the key path and the fix, e.g.::

    config error: agent.max_steps: must be between 1 and 50 (got 0). Fix it in config.yaml
    or remove the key to use the default (8).

Secrets are ``SecretStr`` values in ``Config.secrets``: ``repr``, ``str`` and logging show
``**********``, and no error message ever contains one. A secret-looking key in the YAML file
(``api_key``, ``token``, ``signing_secret``, ...) is refused with the environment variable to
use instead. Nothing here runs at import time.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import annotated_types
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import ErrorDetails

from bot.config_voice import SttConfig, TtsConfig
from bot.config_yaml import unique_key_loader
from bot.memory_config import MemoryConfig
from bot.schedule_config import ScheduleConfig
from core.errors import ReactbotError
from core.pricing import Price

if TYPE_CHECKING:
    import yaml

__all__ = [
    "AgentConfig",
    "ApprovalConfig",
    "CalculateConfig",
    "Config",
    "ConfigError",
    "DiscordConfig",
    "LookupConfig",
    "MCPConfig",
    "MCPServerConfig",
    "ModelConfig",
    "OpsConfig",
    "RedisConfig",
    "SearchConfig",
    "Secrets",
    "SlackConfig",
    "TelemetryConfig",
    "ToolsConfig",
    "WebConfig",
    "env_key_variable",
    "load_config",
    "resolve_config_path",
]

CONFIG_PATH_ENV = "REACTBOT_CONFIG"

DEPRECATED_KEYS: tuple[str, ...] = ("slack.use_native_streaming",)
"""Keys still accepted for old files (each says what replaces it); the example leaves them out."""

# Environment variables that override a config key (file < environment).
ENV_OVERRIDES: Mapping[str, tuple[str, ...]] = {
    "REACTBOT_MODEL": ("model", "name"),
    "OPENAI_BASE_URL": ("model", "base_url"),
    "REDIS_URL": ("redis", "url"),
    "OTEL_EXPORTER_OTLP_ENDPOINT": ("telemetry", "otlp_endpoint"),
}

# Any key from the environment: ``REACTBOT_`` and the key path in capitals, its levels joined
# by ``__`` (``REACTBOT_TOOLS__SEARCH__MAX_RESULTS``); a top-level key that is not a section
# has no ``__`` (``REACTBOT_LOG_LEVEL``). The value is JSON when it parses (true, 5, ["a"]),
# else the text itself. They are applied after ``ENV_OVERRIDES``, so they win over them too.
ENV_KEY_PREFIX = "REACTBOT_"
ENV_KEY_SEPARATOR = "__"

# Secrets: ``Secrets`` field -> environment variable. They are never read from the file.
SECRET_ENV_VARS: Mapping[str, str] = {
    "openai_api_key": "OPENAI_API_KEY",
    "tavily_api_key": "TAVILY_API_KEY",
    "discord_token": "DISCORD_TOKEN",
    "slack_bot_token": "SLACK_BOT_TOKEN",
    "slack_app_token": "SLACK_APP_TOKEN",
    "slack_signing_secret": "SLACK_SIGNING_SECRET",
    "link_secret": "REACTBOT_LINK_SECRET",
    "web_token": "REACTBOT_WEB_TOKEN",
    "telegram_bot_token": "TELEGRAM_BOT_TOKEN",
}


class ConfigError(ReactbotError):
    """The configuration cannot be used: one line per problem, each starting with
    ``config error:``, saying which key and how to fix it. Never contains a secret."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__("\n".join(f"config error: {p}" for p in self.problems))


# --------------------------------------------------------------------------------------------
# The schema


def _check_http_url(value: str | None) -> str | None:
    if value is not None and not value.startswith(("http://", "https://")):
        raise ValueError("must start with http:// or https://")
    return value


def _check_not_blank(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise ValueError("must not be empty (remove the key to leave it unset)")
    return value


class _Section(BaseModel):
    # Start-up (bench/startup.py): a section's validator is built when something is first
    # validated, not at import; with no file and no REACTBOT_* key nothing is (load_config).
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # URLs may carry credentials (redis://:password@host): never show them.
        for name, value in super().__repr_args__():
            yield name, _redact_url(value) if isinstance(value, str) else value

    @model_serializer(mode="wrap")
    def _redacted_dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Dumps are for display and logs too; SecretStr fields already dump as stars.
        data = handler(self)
        if not isinstance(data, dict):
            return data
        return {k: _redact_url(v) if isinstance(v, str) else v for k, v in data.items()}


_S = typing.TypeVar("_S", bound=_Section)


def _defaults(section: type[_S]) -> typing.Callable[[], _S]:
    """The default of a section-valued key: the section with each key at its default, built
    without validating it (``model_construct``), which is what validating no keys gives (every
    section's validators accept its defaults, tests/unit/test_config.py checks it) without
    building the section's validator."""
    return section.model_construct


class PriceConfig(_Section):
    """What a model costs, in US dollars per million tokens (``model.price``, ``models.*.price``)."""

    input: float = Field(ge=0, le=100_000)
    output: float = Field(ge=0, le=100_000)
    cached_input: float | None = Field(default=None, ge=0, le=100_000)
    """Prompt tokens served from the provider's cache; without it they cost ``input``."""


class ModelConfig(_Section):
    name: str = ""
    base_url: str | None = None
    request_timeout: float = Field(default=60.0, gt=0, le=3600)
    max_retries: int = Field(default=3, ge=0, le=10)
    temperature: float = Field(default=0.0, ge=0, le=2)
    answer_model: str | None = None
    step_model: str | None = None
    max_tokens: int = Field(default=2048, ge=1, le=1_000_000)
    """Per model call: a reply can never run away with the budget."""
    vision: bool = False
    """The model reads images: attached images go to it with the question."""
    price: PriceConfig | None = None
    """The price of the configured model(s) (``name``, ``step_model``, ``answer_model``);
    without it, runs show tokens only."""

    _http_url = field_validator("base_url")(_check_http_url)
    _not_blank = field_validator("answer_model", "step_model")(_check_not_blank)


class ApprovalConfig(_Section):
    tools: tuple[str, ...] = ()
    """Tool names whose every run a person approves (besides tools whose hints ask for it)."""
    approvers: Literal["asker", "admins", "anyone"] = "asker"
    timeout: float = Field(default=300.0, gt=0, le=86400)
    remember: bool = True


class AgentConfig(_Section):
    max_steps: int = Field(default=8, ge=1, le=50)
    tool_timeout: float = Field(default=20.0, gt=0, le=3600)
    deadline: float = Field(default=180.0, gt=0, le=86400)
    format_retries: int = Field(default=2, ge=0, le=5)
    observation_limit: int = Field(default=2000, ge=100, le=1_000_000)
    history_token_budget: int = Field(default=3000, ge=100, le=10_000_000)
    max_question_chars: int = Field(default=4000, ge=1, le=1_000_000)
    max_runs_per_user: int = Field(default=2, ge=1, le=1000)
    max_concurrent_runs: int = Field(default=500, ge=1, le=100_000)
    """Runs one process answers at once, on all its surfaces together; a question past them
    is told, at once, to ask again in a moment (``adapters.room``)."""
    mode: Literal["text", "tools", "json"] = "text"
    parallel_tools: int = Field(default=4, ge=1, le=32)
    approval: ApprovalConfig = Field(default_factory=_defaults(ApprovalConfig))
    merge_window: float = Field(default=1.5, ge=0, le=30)
    """Seconds: messages from one person in one conversation this close together, before a
    run starts, are one question (0: every message on its own)."""
    lease_seconds: float = Field(default=25.0, ge=2, le=30)
    """Seconds a conversation's lock and a person's run slot outlive a process that died,
    and how long an answer may go without a heartbeat before a live process finishes it as
    interrupted (live runs renew all three every few seconds)."""


class SearchConfig(_Section):
    enabled: bool = True
    api_base_url: str | None = None
    max_results: int = Field(default=3, ge=1, le=20)
    include_answer: bool = True
    timeout: float = Field(default=10.0, gt=0, le=600)
    cache_ttl: int = Field(default=3600, ge=0, le=30 * 86400)

    _http_url = field_validator("api_base_url")(_check_http_url)


def _variable_name(name: str | None) -> str | None:
    return name if name is None else _check_variable_name(name, "the value")


class EmbeddingsConfig(_Section):
    """Hybrid lookup (docs/tools.md): off while ``model`` is unset; the key is read from the
    variable ``api_key_env`` names (a local ``base_url`` may need none)."""

    model: str | None = Field(default=None, min_length=1)
    base_url: str | None = None
    api_key_env: str | None = None
    _http_url = field_validator("base_url")(_check_http_url)
    _variable = field_validator("api_key_env")(_variable_name)


class LookupConfig(_Section):
    enabled: bool = True
    paths: tuple[Path, ...] = ()
    """The operator's knowledge folders; none: the shipped manual is the knowledge base; some:
    the manual is searched only for keywords that name reactbot (docs/tools.md)."""
    path: Path | None = None
    """One folder, as before ``paths``; still read, searched after ``paths``."""
    refresh_seconds: float = Field(default=5.0, ge=0, le=86400)
    embeddings: EmbeddingsConfig = Field(default_factory=_defaults(EmbeddingsConfig))

    @property
    def folders(self) -> tuple[Path, ...]:
        """``paths`` and ``path``, each folder once, in that order."""
        return tuple(dict.fromkeys((*self.paths, *((self.path,) if self.path else ()))))


class CalculateConfig(_Section):
    enabled: bool = True
    timeout: float = Field(default=2.0, gt=0, le=60)


_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
_ENV_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def _check_variable_name(name: str, where: str) -> str:
    # The value itself is never echoed: it may be a token written here by mistake.
    if _TOKEN_LIKE.match(name):
        raise ValueError(
            f"{where} looks like a secret itself; put it in an environment variable and name "
            "that variable here"
        )
    if not _ENV_VAR.match(name):
        raise ValueError(
            f"{where} is not an environment variable name (letters, digits and '_'; the value "
            "is read from that variable, never written here)"
        )
    return name


class MCPServerConfig(_Section):
    """One Model Context Protocol server: a command run over stdio, or a Streamable HTTP
    ``url``. Secrets stay in the environment (``env_from`` and ``headers_from`` name them)."""

    name: str
    enabled: bool = True
    command: str | None = None
    args: tuple[str, ...] = ()
    cwd: Path | None = None
    env_from: tuple[str, ...] = ()
    url: str | None = None
    headers_from: dict[str, str] = Field(default_factory=dict)
    tools: tuple[str, ...] | None = None
    """Allow-list of the server's own tool names; None: every tool it offers."""
    approval: bool | None = None
    """True: every tool of this server needs approval; False: none does; None: each tool's
    annotations decide (not read-only: approval)."""

    _http_url = field_validator("url")(_check_http_url)
    _not_blank = field_validator("command")(_check_not_blank)

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        if not _SERVER_NAME.match(value):
            raise ValueError(
                "must be 1 to 32 letters, digits, '_' or '-', starting with a letter or digit "
                "(it prefixes the server's tool names)"
            )
        return value

    @field_validator("env_from")
    @classmethod
    def _variable_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for index, name in enumerate(names):
            _check_variable_name(name, f"item {index}")
        return names

    @field_validator("headers_from")
    @classmethod
    def _header_variables(cls, headers: dict[str, str]) -> dict[str, str]:
        for header, variable in headers.items():
            if not _HEADER_NAME.match(header):
                raise ValueError(f"{header!r} is not an HTTP header name")
            _check_variable_name(variable, header)
        return headers

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "give either command (a server run over stdio) or url (Streamable HTTP), "
                "not both and not neither"
            )
        if self.url is not None:
            stdio_only = [k for k in ("args", "cwd", "env_from") if k in self.model_fields_set]
            if stdio_only:
                raise ValueError(f"{', '.join(stdio_only)} apply to a command, not to a url")
        if self.command is not None and self.headers_from:
            raise ValueError("headers_from applies to a url, not to a command")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    @property
    def variables(self) -> tuple[str, ...]:
        """The environment variables this server reads: ``env_from`` and ``headers_from``."""
        return (*self.env_from, *self.headers_from.values())


class MCPConfig(_Section):
    servers: tuple[MCPServerConfig, ...] = ()
    timeout: float = Field(default=30.0, gt=0, le=3600)
    """Seconds per tool call (and per connect and listing) before it is cancelled."""

    @field_validator("servers")
    @classmethod
    def _unique_names(cls, servers: tuple[MCPServerConfig, ...]) -> tuple[MCPServerConfig, ...]:
        seen: set[str] = set()
        for server in servers:
            if server.name.lower() in seen:
                raise ValueError(f"two servers are named {server.name!r}; names must differ")
            seen.add(server.name.lower())
        return servers

    @property
    def enabled(self) -> tuple[MCPServerConfig, ...]:
        return tuple(s for s in self.servers if s.enabled)


class ToolsConfig(_Section):
    search: SearchConfig = Field(default_factory=_defaults(SearchConfig))
    lookup: LookupConfig = Field(default_factory=_defaults(LookupConfig))
    calculate: CalculateConfig = Field(default_factory=_defaults(CalculateConfig))
    mcp: MCPConfig = Field(default_factory=_defaults(MCPConfig))


class RedisConfig(_Section):
    url: str | None = None
    prefix: str = Field(default="reactbot:", min_length=1)
    history_turns: int = Field(default=10, ge=1, le=10_000)
    history_ttl_days: float = Field(default=7.0, gt=0, le=3650)
    trace_ttl_days: float = Field(default=30.0, gt=0, le=3650)
    store_steps: bool = False
    per_thread: bool = True
    max_traces: int = Field(default=100_000, ge=0, le=100_000_000)
    """Traces kept in all; beyond, the oldest is removed as a new one is saved. 0: no bound."""
    max_trace_bytes: int = Field(default=1_048_576, ge=4096, le=512 * 1024 * 1024)
    """Bytes one stored trace takes at most after compression (the longest tool results
    are cut to fit; the thread's attachment keeps them whole)."""

    sentinels: tuple[str, ...] = ()
    """``host:port`` of each Redis Sentinel: the primary is the one they name
    ``sentinel_service``, followed through a failover. ``url``, when set, then gives only the
    scheme (``rediss://`` for TLS), the credentials and the db; its host is not used."""
    sentinel_service: str | None = None
    """The primary's name in the Sentinels' configuration (``sentinel monitor NAME ...``)."""
    cluster: bool = False
    """``url`` names one node of a Redis Cluster; the others are discovered from it."""
    tls_ca_file: Path | None = None
    """CA certificates to verify the server by (``rediss://``); None: the system's."""
    tls_cert_file: Path | None = None
    """A client certificate, for a server with ``tls-auth-clients yes`` (``rediss://``)."""
    tls_key_file: Path | None = None
    """The client certificate's private key (with ``tls_cert_file``)."""
    tls_check_hostname: bool = True
    """Whether the server's certificate must name the host connected to."""

    @field_validator("url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return value

    @field_validator("sentinels")
    @classmethod
    def _host_ports(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            host, _, port = item.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"each sentinel is host:port, e.g. 10.0.0.5:26379 (got {item!r})")
        return value

    @model_validator(mode="after")
    def _topology(self) -> RedisConfig:
        if self.sentinels and self.cluster:
            raise ValueError("redis.sentinels and redis.cluster exclude each other: pick one")
        if self.sentinels and not self.sentinel_service:
            raise ValueError(
                "redis.sentinels needs redis.sentinel_service, the primary's name the "
                "sentinels monitor (sentinel monitor NAME host port quorum)"
            )
        if self.sentinel_service and not self.sentinels:
            raise ValueError("redis.sentinel_service needs redis.sentinels (host:port of each)")
        if self.cluster and self.url is None:
            raise ValueError("redis.cluster needs redis.url, naming any node of the cluster")
        if (self.sentinels or self.cluster) and self.url and self.url.startswith("unix://"):
            raise ValueError("redis.sentinels and redis.cluster need a redis:// or rediss:// url")
        if self.cluster and ("{" in self.prefix or "}" in self.prefix):
            raise ValueError(
                "redis.prefix may not hold { or } with redis.cluster: the bot puts each "
                "conversation's hash tag in its keys itself"
            )
        tls = (self.tls_ca_file, self.tls_cert_file, self.tls_key_file)
        if any(tls) and not (self.url or "").startswith("rediss://"):
            raise ValueError("redis.tls_* settings need a rediss:// url (TLS)")
        if self.tls_key_file and not self.tls_cert_file:
            raise ValueError("redis.tls_key_file needs redis.tls_cert_file")
        return self

    @property
    def configured(self) -> bool:
        """Whether the bot keeps its state in Redis (a url, or sentinels)."""
        return self.url is not None or bool(self.sentinels)


class DiscordConfig(_Section):
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

    _http_url = field_validator("api_base_url")(_check_http_url)

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


class SuggestedPrompt(_Section):
    """One of the prompts Slack's assistant surface offers in a new thread."""

    title: str = Field(min_length=1)
    message: str = Field(min_length=1)


class SlackConfig(_Section):
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

    _http_url = field_validator("api_base_url")(_check_http_url)

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


class TelemetryConfig(_Section):
    otlp_endpoint: str | None = None
    """OpenTelemetry traces go to this OTLP/HTTP base URL (``{it}/v1/traces``), as with
    ``OTEL_EXPORTER_OTLP_ENDPOINT``; unset, nothing is traced and the SDK is not loaded."""
    capture_content: bool = False
    """Also put the question, thoughts, tool inputs, observations and the answer in spans."""

    _http_url = field_validator("otlp_endpoint")(_check_http_url)


class WebConfig(_Section):
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

    _http_url = field_validator("public_url")(_check_http_url)

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


class TelegramConfig(_Section):
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

    _http_url = field_validator("api_base_url")(_check_http_url)

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


class OpsConfig(_Section):
    """The operator's HTTP endpoint (``/healthz``, ``/readyz``, ``/metrics``) of ``serve``."""

    enabled: bool = True
    host: str = Field(default="127.0.0.1", min_length=1)
    """The loopback only: metrics and trace pages are for the operator. A container binds
    0.0.0.0 so its published port reaches it (compose.yaml sets ``REACTBOT_OPS__HOST``)."""
    port: int = Field(default=9464, ge=1, le=65535)
    max_loop_lag: float = Field(default=0.25, ge=0, le=60)
    """Seconds the event loop may run late before new questions are told, at once, to ask
    again in a moment (the runs going keep the loop's time); 0: never refused for it. Checked
    whether or not the endpoint is on (``adapters.room``)."""


class Secrets(_Section):
    """Credentials, from the environment only; each is ``None`` when unset or empty."""

    openai_api_key: SecretStr | None = None
    tavily_api_key: SecretStr | None = None
    discord_token: SecretStr | None = None
    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    link_secret: SecretStr | None = None
    """The HMAC key of trace page links; without it no link is made and the pages are off."""
    web_token: SecretStr | None = None
    """What people sign in to the web chat with; required when it listens beyond loopback."""
    telegram_bot_token: SecretStr | None = None
    """BotFather's token of the Telegram bot."""
    mcp: dict[str, SecretStr] = Field(default_factory=dict)
    """The variables MCP servers name (``env_from``, ``headers_from``) that are set."""
    models: dict[str, SecretStr] = Field(default_factory=dict)
    """The variables catalogue models name (``api_key_env``) that are set."""

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], *, mcp: Iterable[str] = (), models: Iterable[str] = ()
    ) -> Secrets:
        values = {field: (env.get(var) or "").strip() for field, var in SECRET_ENV_VARS.items()}
        named = {var: env.get(var, "") for var in mcp}
        keys = {var: (env.get(var) or "").strip() for var in models}
        # Every value is a SecretStr already, under a field's own name: nothing to validate,
        # so no validator is built (start-up); tests/unit/test_config.py compares it.
        fields: dict[str, Any] = {field: SecretStr(v) for field, v in values.items() if v}
        fields["mcp"] = {var: SecretStr(v) for var, v in named.items() if v}
        fields["models"] = {var: SecretStr(v) for var, v in keys.items() if v}
        return cls.model_construct(**fields)

    def values(self) -> list[str]:
        """The secret values that are set (to scrub them from any text)."""
        secrets = [getattr(self, field) for field in SECRET_ENV_VARS]
        secrets += self.mcp.values()
        secrets += self.models.values()
        return [s.get_secret_value() for s in secrets if s is not None]


_CATALOGUE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")


class CatalogueModel(_Section):
    """One entry of the model catalogue (``models:``), chosen per channel or per question.
    Its key comes from the environment variable ``api_key_env`` names (``OPENAI_API_KEY``
    when unset), never from this file."""

    name: str = Field(min_length=1)
    base_url: str | None = None
    api_key_env: str | None = None
    vision: bool = False
    memory: bool = True  # false: this provider never receives memories (``core.memories``)
    price: PriceConfig | None = None

    _http_url = field_validator("base_url")(_check_http_url)
    _variable = field_validator("api_key_env")(_variable_name)


class BudgetsConfig(_Section):
    """Daily token and dollar limits (0: none), counted from the usage the model reports, per UTC day,
    shared by every replica through Redis; admins are exempt."""

    tokens_per_user_per_day: int = Field(default=0, ge=0)
    tokens_per_channel_per_day: int = Field(default=0, ge=0)
    usd_per_user_per_day: float = Field(default=0.0, ge=0, le=1_000_000)
    """US dollars a person may spend a day (0: no limit), from the models' ``price``."""
    usd_per_channel_per_day: float = Field(default=0.0, ge=0, le=1_000_000)
    reserve_usd: float = Field(default=0.0, ge=0, le=1_000_000)
    """US dollars each running question holds of the dollar budgets from its admission until
    its real cost is counted (0: the asker's average run of the day, or everything left
    before their first): a question is admitted only while something is left after what
    the running ones hold (``core.budgets``)."""
    reserve_tokens: int = Field(default=0, ge=0)
    """The same for the token budgets."""


FileKind = Literal["text", "markdown", "csv", "html", "pdf", "code"]


class FilesConfig(_Section):
    """Files attached to a question, read as knowledge for the conversation."""

    enabled: bool = True
    max_bytes: int = Field(default=10 * 1024 * 1024, ge=1, le=100 * 1024 * 1024)
    max_per_question: int = Field(default=5, ge=1, le=50)
    max_chars_per_conversation: int = Field(default=500_000, ge=1, le=10_000_000)
    allowed_types: tuple[FileKind, ...] = ("text", "markdown", "csv", "html", "pdf", "code")
    download_timeout: float = Field(default=30.0, gt=0, le=600)
    # Each file is read in a worker process: at most this many at once (one per person, fairly
    # queued), each within this many seconds of CPU and of wall time and this much memory.
    max_parallel: int = Field(default=2, ge=1, le=64)
    parse_seconds: float = Field(default=10.0, gt=0, le=600)
    parse_memory_mb: int = Field(default=512, ge=64, le=65_536)


class ContextConfig(_Section):
    """Earlier messages read when the bot is asked in a thread or channel where others talked."""

    messages: int = Field(default=20, ge=0, le=100)
    """At most this many earlier messages (0: none are read)."""
    max_chars: int = Field(default=8000, ge=0, le=100_000)
    """At most this many characters of them, the newest kept."""


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class Config(_Section):
    """Everything the bot is configured with. Build it with ``load_config``."""

    model: ModelConfig = Field(default_factory=_defaults(ModelConfig))
    agent: AgentConfig = Field(default_factory=_defaults(AgentConfig))
    tools: ToolsConfig = Field(default_factory=_defaults(ToolsConfig))
    redis: RedisConfig = Field(default_factory=_defaults(RedisConfig))
    discord: DiscordConfig = Field(default_factory=_defaults(DiscordConfig))
    slack: SlackConfig = Field(default_factory=_defaults(SlackConfig))
    budgets: BudgetsConfig = Field(default_factory=_defaults(BudgetsConfig))
    models: dict[str, CatalogueModel] = Field(default_factory=dict)
    """The model catalogue: names a channel (``/reactbot model``) or a question may pick."""
    telemetry: TelemetryConfig = Field(default_factory=_defaults(TelemetryConfig))
    web: WebConfig = Field(default_factory=_defaults(WebConfig))
    telegram: TelegramConfig = Field(default_factory=_defaults(TelegramConfig))
    files: FilesConfig = Field(default_factory=_defaults(FilesConfig))
    ops: OpsConfig = Field(default_factory=_defaults(OpsConfig))
    context: ContextConfig = Field(default_factory=_defaults(ContextConfig))
    memory: MemoryConfig = Field(default_factory=MemoryConfig.model_construct)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig.model_construct)
    stt: SttConfig = Field(default_factory=SttConfig.model_construct)
    tts: TtsConfig = Field(default_factory=TtsConfig.model_construct)
    log_level: LogLevel = "INFO"
    log_format: Literal["text", "json"] = "text"
    """``json``: one JSON object per line, a run's lines carrying its id and conversation."""
    secrets: Secrets = Field(default_factory=_defaults(Secrets))

    @field_validator("models")
    @classmethod
    def _catalogue_names(cls, models: dict[str, CatalogueModel]) -> dict[str, CatalogueModel]:
        for name in models:
            if not _CATALOGUE_NAME.match(name) or name.lower() == "default":
                raise ValueError(
                    f"{name[:40]!r} cannot name a model here: use letters, digits, '.', '_', "
                    "':' or '-' (at most 64, not 'default')"
                )
        return models

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_log_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @property
    def model_configured(self) -> bool:
        """A real model is named; otherwise the offline demo model answers."""
        return bool(self.model.name)

    @property
    def search_enabled(self) -> bool:
        return self.tools.search.enabled and self.secrets.tavily_api_key is not None


def model_prices(config: Config) -> dict[str, Price]:
    """Each priced model's price by the name its runs record: ``model.price`` for the
    configured model(s), each catalogue entry's ``price`` for its model (it wins when both
    name the same model)."""
    prices: dict[str, Price] = {}
    section = config.model
    if section.price is not None and config.model_configured:
        for name in (section.name, section.step_model, section.answer_model):
            if name:
                prices[name] = _price(section.price)
    for entry in config.models.values():
        if entry.price is not None:
            prices[entry.name] = _price(entry.price)
    return prices


def picked_model_price(config: Config, name: str) -> Price | None:
    """The price of the model ``--model NAME`` runs on (``reactbot eval``): a catalogue
    entry's own price by its catalogue name; any other name runs on the configured endpoint,
    so only ``model.price`` can be its price, and only when the configured model section
    names that model. Never another entry's price for a model of the same name elsewhere."""
    entry = config.models.get(name)
    if entry is not None:
        return _price(entry.price) if entry.price is not None else None
    section = config.model
    named = {section.name, section.step_model, section.answer_model} - {None, ""}
    if section.price is None or not config.model_configured or name not in named:
        return None
    return _price(section.price)


def _price(price: PriceConfig) -> Price:
    return Price(price.input, price.output, price.cached_input)


# Top-level keys that are not read from the file.
_NOT_FROM_FILE = frozenset({"secrets"})


# --------------------------------------------------------------------------------------------
# Loading


def resolve_config_path(path: str | Path | None, env: Mapping[str, str]) -> Path | None:
    """The file to read: ``path`` (``--config``), else ``REACTBOT_CONFIG``, else none."""
    if path is not None and str(path) != "":
        return Path(path).expanduser()
    from_env = env.get(CONFIG_PATH_ENV, "")
    return Path(from_env).expanduser() if from_env else None


def load_config(path: str | Path | None, env: Mapping[str, str]) -> Config:
    """Read the YAML file (if any), apply environment overrides and secrets, validate.

    Raises ``ConfigError`` naming every wrong key and how to fix it.
    """
    file = resolve_config_path(path, env)
    data = _read_yaml(file) if file is not None else {}
    _refuse_secret_keys(data)
    _drop_empty_sections(data, Config)
    overridden = _apply_env_overrides(data, env)
    overridden |= _apply_env_keys(data, env, file)
    secrets = Secrets.from_env(env, mcp=_mcp_variables(data), models=_model_variables(data))
    if not data:  # the embedded defaults: nothing to validate, and no validator to build
        return _resolve_relative_paths(Config.model_construct(secrets=secrets), file)
    try:
        config = Config.model_validate({**data, "secrets": secrets})
    except ValidationError as exc:
        problems = [_describe(e, file=file, overridden=overridden) for e in exc.errors()]
        raise ConfigError(_scrub(p, secrets) for p in problems) from None
    return _resolve_relative_paths(config, file)


def _mcp_variables(data: Mapping[str, Any]) -> list[str]:
    """The environment variables MCP server entries name (read before validation, so the
    secrets are in place whatever else is wrong; anything malformed is left to it)."""
    tools = data.get("tools")
    mcp = tools.get("mcp") if isinstance(tools, Mapping) else None
    servers = mcp.get("servers") if isinstance(mcp, Mapping) else None
    names: list[str] = []
    for server in servers if isinstance(servers, list) else ():
        if not isinstance(server, Mapping):
            continue
        env_from = server.get("env_from")
        headers_from = server.get("headers_from")
        names += env_from if isinstance(env_from, list) else ()
        names += headers_from.values() if isinstance(headers_from, Mapping) else ()
    return [n for n in names if isinstance(n, str) and _ENV_VAR.match(n)]


def _model_variables(data: Mapping[str, Any]) -> list[str]:
    """The variables ``models.*``, ``tools.lookup.embeddings``, ``stt`` and ``tts`` name as ``api_key_env``."""
    models = data.get("models")
    entries = list(models.values()) if isinstance(models, Mapping) else []
    tools = data.get("tools")
    lookup = tools.get("lookup") if isinstance(tools, Mapping) else None
    entries.append(lookup.get("embeddings") if isinstance(lookup, Mapping) else None)
    entries += [data.get("stt"), data.get("tts")]
    names = [e.get("api_key_env") for e in entries if isinstance(e, Mapping)]
    return [n for n in names if isinstance(n, str) and _ENV_VAR.match(n)]


def _read_yaml(file: Path) -> dict[str, Any]:
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            [f"{file}: file not found (check --config or {CONFIG_PATH_ENV})"]
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError([f"{file}: cannot read the file ({reason})"]) from None
    import yaml

    try:
        data = yaml.load(text, Loader=unique_key_loader())
    except yaml.YAMLError as exc:
        raise ConfigError([_describe_yaml_error(file, exc)]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            [f"{file}: the top level must be a mapping of sections (got {_kind(data)})"]
        )
    return data


def _describe_yaml_error(file: Path, exc: yaml.YAMLError) -> str:
    # Only the problem and its position: the snippet PyYAML adds could quote a secret.
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or "invalid YAML"
    where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{file}{where}: invalid YAML: {problem}"


_SECRET_KEY = re.compile(
    r"(^|[_-])(api[_-]?key|token|secret|secrets|signing[_-]secret|password|passwd)$", re.I
)

_SECRET_KEY_ENV: Mapping[str, str] = {
    "model.api_key": "OPENAI_API_KEY",
    "model.openai_api_key": "OPENAI_API_KEY",
    "tools.search.api_key": "TAVILY_API_KEY",
    "tools.search.tavily_api_key": "TAVILY_API_KEY",
    "discord.token": "DISCORD_TOKEN",
    "discord.bot_token": "DISCORD_TOKEN",
    "slack.bot_token": "SLACK_BOT_TOKEN",
    "slack.token": "SLACK_BOT_TOKEN",
    "slack.app_token": "SLACK_APP_TOKEN",
    "slack.signing_secret": "SLACK_SIGNING_SECRET",
    "web.link_secret": "REACTBOT_LINK_SECRET",
    "web.secret": "REACTBOT_LINK_SECRET",
    "web.token": "REACTBOT_WEB_TOKEN",
    "web.web_token": "REACTBOT_WEB_TOKEN",
    "telegram.token": "TELEGRAM_BOT_TOKEN",
    "telegram.bot_token": "TELEGRAM_BOT_TOKEN",
}


def _refuse_secret_keys(data: Mapping[Any, Any]) -> None:
    problems = [
        f"{_format_loc(key_path)}: secrets are not read from the config file; remove the key "
        f"and {_secret_fix(key_path)}"
        for key_path in _secret_key_paths(data, ())
    ]
    if problems:
        raise ConfigError(problems)


def _secret_fix(key_path: tuple[int | str, ...]) -> str:
    dotted = _format_loc(key_path)
    var = _SECRET_KEY_ENV.get(dotted) or SECRET_ENV_VARS.get(str(key_path[-1]).lower())
    if var:
        return f"set the {var} environment variable instead"
    if dotted.startswith("tools.mcp.servers["):
        return (
            "put it in an environment variable and name that variable in env_from "
            "(a command) or headers_from (a url)"
        )
    return f"use the environment variables instead ({', '.join(SECRET_ENV_VARS.values())})"


# Mappings whose keys are names, not settings: ``headers_from: {X-Api-Key: MY_KEY}`` names
# the variable holding the key, which is exactly how a secret should be configured.
_NAME_MAPPINGS = frozenset({"headers_from"})


def _secret_key_paths(
    node: object, prefix: tuple[int | str, ...]
) -> Iterator[tuple[int | str, ...]]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            path = (*prefix, str(key))
            if _SECRET_KEY.search(str(key)):
                yield path
            elif str(key) not in _NAME_MAPPINGS:
                yield from _secret_key_paths(value, path)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _secret_key_paths(item, (*prefix, index))


def _drop_empty_sections(data: dict[Any, Any], section: type[BaseModel]) -> None:
    """``discord:`` with every key commented out (YAML null) means the section's defaults."""
    for name, info in section.model_fields.items():
        annotation = info.annotation
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            continue
        if name in data and data[name] is None:
            del data[name]
        elif isinstance(data.get(name), dict):
            _drop_empty_sections(data[name], annotation)


def _apply_env_overrides(
    data: dict[str, Any], env: Mapping[str, str]
) -> dict[tuple[str, ...], str]:
    """Write the set override variables into ``data``; return which key came from which var."""
    overridden: dict[tuple[str, ...], str] = {}
    for var, (section, key) in ENV_OVERRIDES.items():
        value = env.get(var, "").strip()
        if not value:
            continue
        current = data.get(section)
        if current is None:
            current = data[section] = {}
        if isinstance(current, dict):  # anything else is reported by validation
            current[key] = value
            overridden[(section, key)] = var
    return overridden


def env_key_variable(path: Sequence[str]) -> str:
    """The variable that sets a key: ``("web", "enabled")`` -> ``REACTBOT_WEB__ENABLED``."""
    return ENV_KEY_PREFIX + ENV_KEY_SEPARATOR.join(part.upper() for part in path)


def _env_key_paths(env: Mapping[str, str]) -> Iterator[tuple[str, tuple[str, ...]]]:
    """Each ``REACTBOT_<SECTION>__<KEY>`` variable and the key path it names."""
    top_level = {
        env_key_variable((name,)): name
        for name, info in Config.model_fields.items()
        if name not in _NOT_FROM_FILE and _section_type(info.annotation) is None
    }
    for var in sorted(env):
        rest = var.removeprefix(ENV_KEY_PREFIX)
        if var in top_level:
            yield var, (top_level[var],)
        elif rest != var and ENV_KEY_SEPARATOR in rest:
            yield var, tuple(rest.lower().split(ENV_KEY_SEPARATOR))


def _apply_env_keys(
    data: dict[str, Any], env: Mapping[str, str], file: Path | None
) -> dict[tuple[str, ...], str]:
    """Write each set ``REACTBOT_<SECTION>__<KEY>`` into ``data`` (the environment wins over
    the file); return which key came from which variable. Secrets are refused here as in
    the file: they have their own variables."""
    overridden: dict[tuple[str, ...], str] = {}
    problems: list[str] = []
    for var, path in _env_key_paths(env):
        raw = env[var].strip()
        if not raw:  # empty counts as unset, as everywhere else
            continue
        value = _env_value(raw, path)
        problem = _env_key_problem(var, path, value) or _set_key(data, path, value, var, file)
        if problem is None:
            overridden[path] = var
        else:
            problems.append(problem)
    if problems:
        raise ConfigError(problems)
    return overridden


def _env_value(raw: str, path: tuple[str, ...]) -> object:
    """JSON when it parses, else the text; a number or true/false stays text for a key that
    takes text (a model named ``1106``)."""
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    if isinstance(value, int | float) and _takes_text(path):
        return raw
    return value


def _takes_text(path: tuple[str, ...]) -> bool:
    owner, field = _field_at(path)
    if owner is None or field is None:
        return False
    annotation = owner.model_fields[field].annotation
    kinds = set(typing.get_args(annotation)) or {annotation}
    return bool(kinds & {str, Path}) and not kinds & {int, float, bool}


def _env_key_problem(var: str, path: tuple[str, ...], value: object) -> str | None:
    if not all(path):
        return f"{var}: not a config key (two underscores separate levels, one joins words)"
    secret: tuple[int | str, ...] | None = path
    if not any(_SECRET_KEY.search(part) for part in path[:-1]):  # secrets.slack_bot_token
        secret = next(_secret_key_paths({path[-1]: value}, path[:-1]), None)
    if secret is None:
        return None
    inside = f" ({_format_loc(secret)} in its value)" if secret != path else ""
    return (
        f"{var}: secrets are not read from REACTBOT_<SECTION>__<KEY> variables{inside}; "
        f"unset it and {_secret_fix(secret)}"
    )


def _set_key(
    data: dict[str, Any], path: tuple[str, ...], value: object, var: str, file: Path | None
) -> str | None:
    """Put ``value`` at ``path``, making the mappings on the way; a problem, or None."""
    node = data
    for depth, part in enumerate(path[:-1], start=1):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            where = file.name if file is not None else "the config file"
            return (
                f"{var}: cannot set {'.'.join(path)}: {'.'.join(path[:depth])} in {where} "
                f"is {_kind(child)}, not a mapping of keys"
            )
        node = child
    node[path[-1]] = value
    return None


def _resolve_relative_paths(config: Config, file: Path | None) -> Config:
    """Expand ``~``; a relative ``tools.lookup.paths``/``path``, MCP server ``cwd`` or ``redis.tls_*``
    file is relative to the config file."""
    tools = config.tools
    lookup = tools.lookup
    lookup = lookup.model_copy(
        update={
            "paths": tuple(_resolve(path, file) for path in lookup.paths),
            "path": None if lookup.path is None else _resolve(lookup.path, file),
        }
    )
    servers = tuple(
        s if s.cwd is None else s.model_copy(update={"cwd": _resolve(s.cwd, file)})
        for s in tools.mcp.servers
    )
    mcp = tools.mcp.model_copy(update={"servers": servers})
    new_tools = tools.model_copy(update={"lookup": lookup, "mcp": mcp})
    names = ("tls_ca_file", "tls_cert_file", "tls_key_file")
    redis = config.redis.model_copy(
        update={
            name: _resolve(path, file)
            for name in names
            if (path := getattr(config.redis, name)) is not None
        }
    )
    return config.model_copy(update={"tools": new_tools, "redis": redis})


def _resolve(path: Path, file: Path | None) -> Path:
    path = path.expanduser()
    if file is not None and not path.is_absolute():
        path = file.parent / path
    return path


# --------------------------------------------------------------------------------------------
# Turning pydantic's errors into messages that name the key and the fix


def _describe(
    error: ErrorDetails, *, file: Path | None, overridden: Mapping[tuple[str, ...], str]
) -> str:
    loc = tuple(error["loc"])
    key = _format_loc(loc)
    variables = _variables_at(loc, overridden)
    if error["type"] == "extra_forbidden":
        by_var = {var: path for path, var in overridden.items()}
        unknown = _unknown_key(loc, env_path=by_var[variables[0]] if variables else None)
        return f"{key}: {unknown}{_from_env(variables)}"
    owner, field = _field_at(loc)
    what = _what_is_wrong(error, owner, field)
    fix = _from_env(variables) or _fix(loc, owner, field, file)
    return f"{key}: {what}{fix}"


def _variables_at(
    loc: tuple[int | str, ...], overridden: Mapping[tuple[str, ...], str]
) -> list[str]:
    """The variables an error comes from: the one whose value holds the error's key, else
    those that set keys under it (an unknown section, a section's own check)."""
    names = tuple(str(p) for p in loc)
    holding = [var for path, var in overridden.items() if names[: len(path)] == path]
    if holding or not names:
        return holding[:1]
    return [var for path, var in overridden.items() if path[: len(names)] == names]


def _from_env(variables: list[str]) -> str:
    if not variables:
        return ""
    if len(variables) == 1:
        return f". It comes from the {variables[0]} environment variable: fix or unset it."
    return f". It comes from the {_and(variables)} environment variables: fix or unset them."


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _format_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _section_at(loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The section a key path leads to; list indices step into a list of sections
    (``tools.mcp.servers[0]``)."""
    model: type[BaseModel] = Config
    for part in loc:
        if isinstance(part, int):
            continue
        info = model.model_fields.get(part)
        found = _section_type(info.annotation if info is not None else None)
        if found is None:
            return None
        model = found
    return model


def _section_type(annotation: object) -> type[BaseModel] | None:
    """``Section`` itself, or the section of a ``tuple[Section, ...]``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is tuple and args and _section_type(args[0]) is not None:
        return _section_type(args[0])
    return None


def _field_at(loc: tuple[int | str, ...]) -> tuple[type[BaseModel] | None, str | None]:
    """The section model and field name an error location points at (list indices dropped)."""
    names = tuple(p for p in loc if isinstance(p, str))
    if not names:
        return None, None
    owner = _section_at(names[:-1])
    if owner is None or names[-1] not in owner.model_fields:
        return None, None
    return owner, names[-1]


def _unknown_key(loc: tuple[int | str, ...], *, env_path: tuple[str, ...] | None = None) -> str:
    """``env_path``: the key path of the variable that set it, to suggest the variable."""
    section = _section_at(loc[:-1])
    if section is None:
        return "unknown key"
    known = [name for name in section.model_fields if name not in _NOT_FROM_FILE]
    import difflib  # with an unknown key only, not with every start-up

    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    if close and env_path is not None and len(env_path) >= len(loc):
        fixed = (*env_path[: len(loc) - 1], close[0], *env_path[len(loc) :])
        return f"unknown key (did you mean {env_key_variable(fixed)}?)"
    if close:
        return f"unknown key (did you mean '{close[0]}'?)"
    return f"unknown key (known keys: {', '.join(known)})"


_TYPE_MESSAGES: Mapping[str, str] = {
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "tuple_type": "must be a list",
    "list_type": "must be a list",
    "model_type": "must be a mapping of keys",
    "model_attributes_type": "must be a mapping of keys",
    "dict_type": "must be a mapping of keys",
    "path_type": "must be a file path",
    "string_too_short": "must not be empty",
}


def _what_is_wrong(error: ErrorDetails, owner: type[BaseModel] | None, field: str | None) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    got = f" (got {_show(error['input'])})"
    if kind == "value_error":
        # A whole entry's problem (a mapping) is said by the message alone.
        shown = "" if isinstance(error["input"], Mapping) else got
        return f"{ctx.get('error', error['msg'])}{shown}"
    if kind == "missing":
        return "is required"
    if kind == "string_type" and isinstance(error["input"], bool):
        return f"must be a string{got}; YAML reads yes, no, on and off as true or false: quote it"
    if kind == "literal_error":
        return f"must be {ctx.get('expected', 'one of the allowed values')}{got}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return f"{_range_text(ctx, owner, field)}{got}"
    if kind in _TYPE_MESSAGES:
        return f"{_TYPE_MESSAGES[kind]}{got}"
    return f"{error['msg'].rstrip('.')}{got}"


def _range_text(ctx: Mapping[str, Any], owner: type[BaseModel] | None, field: str | None) -> str:
    bounds: dict[str, Any] = dict(ctx)
    if owner is not None and field is not None:
        for meta in owner.model_fields[field].metadata:
            for name in ("gt", "ge", "lt", "le"):
                if isinstance(meta, annotated_types.BaseMetadata) and hasattr(meta, name):
                    bounds[name] = getattr(meta, name)
    low = bounds.get("ge", bounds.get("gt"))
    high = bounds.get("le", bounds.get("lt"))
    if "ge" in bounds and "le" in bounds:
        return f"must be between {low} and {high}"
    if "gt" in bounds and high is not None:
        return f"must be greater than {low} and at most {high}"
    if "gt" in bounds:
        return f"must be greater than {low}"
    if "ge" in bounds:
        return f"must be at least {low}"
    return f"must be at most {high}"


def _fix(
    loc: tuple[int | str, ...],
    owner: type[BaseModel] | None,
    field: str | None,
    file: Path | None,
) -> str:
    where = file.name if file is not None else "the config file"
    if loc and isinstance(loc[-1], int):
        return f". Fix this entry in {where}."
    if owner is None or field is None:
        return ""
    if owner.model_fields[field].is_required():
        return f". Add it in {where}."
    default = owner.model_fields[field].get_default(call_default_factory=True)
    if isinstance(default, BaseModel):
        return f". Fix it in {where} or remove the key to use the defaults."
    return f". Fix it in {where} or remove the key to use the default ({_show_default(default)})."


def _show_default(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[]" if not value else "[" + ", ".join(map(str, value)) + "]"
    if isinstance(value, str):
        return f"'{value}'" if value else "''"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


_TOKEN_LIKE = re.compile(r"^(sk-|xox[a-z]-|xapp-|tvly-|gh[pousr]_|github_pat_|Bearer\s)", re.I)


def _show(value: object) -> str:
    """A value for an error message: short, and never a credential."""
    if isinstance(value, str):
        if _TOKEN_LIKE.match(value.strip()):
            return "'**********'"
        shown = _redact_url(value)
        return repr(shown if len(shown) <= 60 else shown[:57] + "...")
    if isinstance(value, Mapping | list | tuple | set):
        return _kind(value)
    return repr(value)


def _kind(value: object) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple | set):
        return "a list"
    return type(value).__name__


_URL_USERINFO = re.compile(r"^([a-z][a-z0-9+.-]*://)[^/@\s]*@", re.I)


def _redact_url(text: str) -> str:
    return _URL_USERINFO.sub(r"\1***@", text)


def _scrub(text: str, secrets: Secrets) -> str:
    for value in secrets.values():
        text = text.replace(value, "**********")
    return text
