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

The sections are here, except the platforms' (``bot.config_platforms``), MCP's
(``bot.config_mcp``), memory's, schedules' and voice's (their own ``bot.*_config`` files);
what they share is ``bot.config_base``; reading the file, refusing secret keys and wording
pydantic's errors are ``bot.config_yaml``, ``bot.config_secrets`` and ``bot.config_errors``.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from bot.config_base import (
    CONFIG_PATH_ENV,
    ENV_KEY_PREFIX,
    ENV_KEY_SEPARATOR,
    NOT_FROM_FILE,
    ConfigError,
    Section,
    check_http_url,
    check_not_blank,
    defaults,
    env_key_variable,
    format_loc,
    kind_of,
)
from bot.config_errors import describe, field_at, section_type
from bot.config_mcp import ENV_VAR, MCPConfig, MCPServerConfig, check_variable_name
from bot.config_platforms import DiscordConfig, SlackConfig, TelegramConfig, WebConfig
from bot.config_secrets import (
    SECRET_ENV_VARS,
    SECRET_KEY,
    refuse_secret_keys,
    secret_fix,
    secret_key_paths,
)
from bot.config_voice import SttConfig, TtsConfig
from bot.config_yaml import read_yaml
from bot.memory_config import MemoryConfig
from bot.schedule_config import ScheduleConfig
from core.pricing import Price

if TYPE_CHECKING:
    pass

__all__ = [
    "CONFIG_PATH_ENV",
    "ENV_KEY_PREFIX",
    "ENV_KEY_SEPARATOR",
    "SECRET_ENV_VARS",
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
    "TelegramConfig",
    "TelemetryConfig",
    "ToolsConfig",
    "WebConfig",
    "env_key_variable",
    "load_config",
    "resolve_config_path",
]


DEPRECATED_KEYS: tuple[str, ...] = ("slack.use_native_streaming",)
"""Keys still accepted for old files (each says what replaces it); the example leaves them out."""

# Environment variables that override a config key (file < environment).
ENV_OVERRIDES: Mapping[str, tuple[str, ...]] = {
    "REACTBOT_MODEL": ("model", "name"),
    "OPENAI_BASE_URL": ("model", "base_url"),
    "REDIS_URL": ("redis", "url"),
    "OTEL_EXPORTER_OTLP_ENDPOINT": ("telemetry", "otlp_endpoint"),
}


# --------------------------------------------------------------------------------------------
# The schema


class PriceConfig(Section):
    """What a model costs, in US dollars per million tokens (``model.price``, ``models.*.price``)."""

    input: float = Field(ge=0, le=100_000)
    output: float = Field(ge=0, le=100_000)
    cached_input: float | None = Field(default=None, ge=0, le=100_000)
    """Prompt tokens served from the provider's cache; without it they cost ``input``."""


class ModelConfig(Section):
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

    _http_url = field_validator("base_url")(check_http_url)
    _not_blank = field_validator("answer_model", "step_model")(check_not_blank)


class ApprovalConfig(Section):
    tools: tuple[str, ...] = ()
    """Tool names whose every run a person approves (besides tools whose hints ask for it)."""
    approvers: Literal["asker", "admins", "anyone"] = "asker"
    timeout: float = Field(default=300.0, gt=0, le=86400)
    remember: bool = True


class AgentConfig(Section):
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
    approval: ApprovalConfig = Field(default_factory=defaults(ApprovalConfig))
    merge_window: float = Field(default=1.5, ge=0, le=30)
    """Seconds: messages from one person in one conversation this close together, before a
    run starts, are one question (0: every message on its own)."""
    lease_seconds: float = Field(default=25.0, ge=2, le=30)
    """Seconds a conversation's lock and a person's run slot outlive a process that died,
    and how long an answer may go without a heartbeat before a live process finishes it as
    interrupted (live runs renew all three every few seconds)."""


class SearchConfig(Section):
    enabled: bool = True
    api_base_url: str | None = None
    max_results: int = Field(default=3, ge=1, le=20)
    include_answer: bool = True
    timeout: float = Field(default=10.0, gt=0, le=600)
    cache_ttl: int = Field(default=3600, ge=0, le=30 * 86400)

    _http_url = field_validator("api_base_url")(check_http_url)


def _variable_name(name: str | None) -> str | None:
    return name if name is None else check_variable_name(name, "the value")


class EmbeddingsConfig(Section):
    """Hybrid lookup (docs/tools.md): off while ``model`` is unset; the key is read from the
    variable ``api_key_env`` names (a local ``base_url`` may need none)."""

    model: str | None = Field(default=None, min_length=1)
    base_url: str | None = None
    api_key_env: str | None = None
    _http_url = field_validator("base_url")(check_http_url)
    _variable = field_validator("api_key_env")(_variable_name)


class LookupConfig(Section):
    enabled: bool = True
    paths: tuple[Path, ...] = ()
    """The operator's knowledge folders; none: the shipped manual is the knowledge base; some:
    the manual is searched only for keywords that name reactbot (docs/tools.md)."""
    path: Path | None = None
    """One folder, as before ``paths``; still read, searched after ``paths``."""
    refresh_seconds: float = Field(default=5.0, ge=0, le=86400)
    embeddings: EmbeddingsConfig = Field(default_factory=defaults(EmbeddingsConfig))

    @property
    def folders(self) -> tuple[Path, ...]:
        """``paths`` and ``path``, each folder once, in that order."""
        return tuple(dict.fromkeys((*self.paths, *((self.path,) if self.path else ()))))


class CalculateConfig(Section):
    enabled: bool = True
    timeout: float = Field(default=2.0, gt=0, le=60)


class ToolsConfig(Section):
    search: SearchConfig = Field(default_factory=defaults(SearchConfig))
    lookup: LookupConfig = Field(default_factory=defaults(LookupConfig))
    calculate: CalculateConfig = Field(default_factory=defaults(CalculateConfig))
    mcp: MCPConfig = Field(default_factory=defaults(MCPConfig))


class RedisConfig(Section):
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


class TelemetryConfig(Section):
    otlp_endpoint: str | None = None
    """OpenTelemetry traces go to this OTLP/HTTP base URL (``{it}/v1/traces``), as with
    ``OTEL_EXPORTER_OTLP_ENDPOINT``; unset, nothing is traced and the SDK is not loaded."""
    capture_content: bool = False
    """Also put the question, thoughts, tool inputs, observations and the answer in spans."""

    _http_url = field_validator("otlp_endpoint")(check_http_url)


class OpsConfig(Section):
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


class Secrets(Section):
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


class CatalogueModel(Section):
    """One entry of the model catalogue (``models:``), chosen per channel or per question.
    Its key comes from the environment variable ``api_key_env`` names (``OPENAI_API_KEY``
    when unset), never from this file."""

    name: str = Field(min_length=1)
    base_url: str | None = None
    api_key_env: str | None = None
    vision: bool = False
    memory: bool = True  # false: this provider never receives memories (``core.memories``)
    price: PriceConfig | None = None

    _http_url = field_validator("base_url")(check_http_url)
    _variable = field_validator("api_key_env")(_variable_name)


class BudgetsConfig(Section):
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


class FilesConfig(Section):
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


class ContextConfig(Section):
    """Earlier messages read when the bot is asked in a thread or channel where others talked."""

    messages: int = Field(default=20, ge=0, le=100)
    """At most this many earlier messages (0: none are read)."""
    max_chars: int = Field(default=8000, ge=0, le=100_000)
    """At most this many characters of them, the newest kept."""


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class Config(Section):
    """Everything the bot is configured with. Build it with ``load_config``."""

    model: ModelConfig = Field(default_factory=defaults(ModelConfig))
    agent: AgentConfig = Field(default_factory=defaults(AgentConfig))
    tools: ToolsConfig = Field(default_factory=defaults(ToolsConfig))
    redis: RedisConfig = Field(default_factory=defaults(RedisConfig))
    discord: DiscordConfig = Field(default_factory=defaults(DiscordConfig))
    slack: SlackConfig = Field(default_factory=defaults(SlackConfig))
    budgets: BudgetsConfig = Field(default_factory=defaults(BudgetsConfig))
    models: dict[str, CatalogueModel] = Field(default_factory=dict)
    """The model catalogue: names a channel (``/reactbot model``) or a question may pick."""
    telemetry: TelemetryConfig = Field(default_factory=defaults(TelemetryConfig))
    web: WebConfig = Field(default_factory=defaults(WebConfig))
    telegram: TelegramConfig = Field(default_factory=defaults(TelegramConfig))
    files: FilesConfig = Field(default_factory=defaults(FilesConfig))
    ops: OpsConfig = Field(default_factory=defaults(OpsConfig))
    context: ContextConfig = Field(default_factory=defaults(ContextConfig))
    memory: MemoryConfig = Field(default_factory=MemoryConfig.model_construct)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig.model_construct)
    stt: SttConfig = Field(default_factory=SttConfig.model_construct)
    tts: TtsConfig = Field(default_factory=TtsConfig.model_construct)
    log_level: LogLevel = "INFO"
    log_format: Literal["text", "json"] = "text"
    """``json``: one JSON object per line, a run's lines carrying its id and conversation."""
    secrets: Secrets = Field(default_factory=defaults(Secrets))

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
    data = read_yaml(file) if file is not None else {}
    refuse_secret_keys(data)
    _drop_empty_sections(data, Config)
    overridden = _apply_env_overrides(data, env)
    overridden |= _apply_env_keys(data, env, file)
    secrets = Secrets.from_env(env, mcp=_mcp_variables(data), models=_model_variables(data))
    if not data:  # the embedded defaults: nothing to validate, and no validator to build
        return _resolve_relative_paths(Config.model_construct(secrets=secrets), file)
    try:
        config = Config.model_validate({**data, "secrets": secrets})
    except ValidationError as exc:
        problems = [describe(Config, e, file=file, overridden=overridden) for e in exc.errors()]
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
    return [n for n in names if isinstance(n, str) and ENV_VAR.match(n)]


def _model_variables(data: Mapping[str, Any]) -> list[str]:
    """The variables ``models.*``, ``tools.lookup.embeddings``, ``stt`` and ``tts`` name as ``api_key_env``."""
    models = data.get("models")
    entries = list(models.values()) if isinstance(models, Mapping) else []
    tools = data.get("tools")
    lookup = tools.get("lookup") if isinstance(tools, Mapping) else None
    entries.append(lookup.get("embeddings") if isinstance(lookup, Mapping) else None)
    entries += [data.get("stt"), data.get("tts")]
    names = [e.get("api_key_env") for e in entries if isinstance(e, Mapping)]
    return [n for n in names if isinstance(n, str) and ENV_VAR.match(n)]


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


def _env_key_paths(env: Mapping[str, str]) -> Iterator[tuple[str, tuple[str, ...]]]:
    """Each ``REACTBOT_<SECTION>__<KEY>`` variable and the key path it names."""
    top_level = {
        env_key_variable((name,)): name
        for name, info in Config.model_fields.items()
        if name not in NOT_FROM_FILE and section_type(info.annotation) is None
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
    owner, field = field_at(Config, path)
    if owner is None or field is None:
        return False
    annotation = owner.model_fields[field].annotation
    kinds = set(typing.get_args(annotation)) or {annotation}
    return bool(kinds & {str, Path}) and not kinds & {int, float, bool}


def _env_key_problem(var: str, path: tuple[str, ...], value: object) -> str | None:
    if not all(path):
        return f"{var}: not a config key (two underscores separate levels, one joins words)"
    secret: tuple[int | str, ...] | None = path
    if not any(SECRET_KEY.search(part) for part in path[:-1]):  # secrets.slack_bot_token
        secret = next(secret_key_paths({path[-1]: value}, path[:-1]), None)
    if secret is None:
        return None
    inside = f" ({format_loc(secret)} in its value)" if secret != path else ""
    return (
        f"{var}: secrets are not read from REACTBOT_<SECTION>__<KEY> variables{inside}; "
        f"unset it and {secret_fix(secret)}"
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
                f"is {kind_of(child)}, not a mapping of keys"
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


def _scrub(text: str, secrets: Secrets) -> str:
    for value in secrets.values():
        text = text.replace(value, "**********")
    return text
