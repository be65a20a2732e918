"""Wiring: turns a Config into a ready Agent with its model, tools and stores.

Nothing here runs at import time; ``App.create`` is called once by the CLI, ``await
app.start()`` connects what needs a connection before the first question (MCP servers), and
``aclose`` releases what was opened (model client, calculator worker, Redis connection, MCP
sessions and their child processes).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bot.config import Config, MCPServerConfig, RedisConfig, model_prices
from bot.logs import RunLogContext
from bot.models import openai_model
from core.agent import Agent, AgentSettings
from core.approval import (
    ApprovalBroker,
)
from core.budgets import TokenBudgets
from core.demo import DemoModel
from core.file_workers import FileReaders
from core.files import FileLimits
from core.llm import ChatModel
from core.memories import Memories
from core.memory import HistoryCompactor
from core.observe import RunObserver
from core.stores import Stores
from core.tools import ToolRegistry
from core.tools.calculator import CalculatorTool
from core.trace import Trace

if TYPE_CHECKING:  # the search, redis and MCP modules load only when configured
    from adapters.channels import ChannelChoices
    from adapters.pacing import Budget
    from adapters.room import Room
    from adapters.scheduled import Joining
    from adapters.voice import Hearing
    from core.embeddings import Hybrid
    from core.stores.redis import Client as Redis
    from core.stores.redis import RedisTarget
    from core.stores.resilient import StoreHealth
    from core.tools.mcp import MCPTools, ServerSpec
    from core.tools.search import SearchTool

log = logging.getLogger(__name__)

KNOWLEDGE_DIR = Path(__file__).parent / "knowledge"
STALL_MARGIN = 15.0
MCP_MARGIN = 5.0
"""The agent's limit on a tool call exceeds the MCP timeout by this much, so the SDK's own
timeout (which cancels the call on the server and says so) always comes first."""


@dataclass(slots=True)
class PlatformLink:
    """A platform being served, as the ops endpoint sees it (``serve_*`` registers it)."""

    connected: Callable[[], Awaitable[bool]]
    """Whether the platform reaches the bot now (gateway or socket open, site listening)."""
    edits: Callable[[], int]
    """Live-message edits the platform took so far."""
    rate_limited: Callable[[], int]
    """429s the platform answered so far."""


@dataclass(kw_only=True)
class App:
    config: Config
    agent: Agent
    model: ChatModel
    tools: ToolRegistry
    stores: Stores
    """Every store (history, traces, locks, claims, slots, settings, files...), in memory or
    on Redis behind one resilient wrapper."""
    broker: ApprovalBroker
    """Carries a person's decision on an action to the run waiting for it, from any process."""
    budgets: TokenBudgets
    """Daily token limits per user and per channel (``budgets.*``), over ``stores.usage``."""
    notes: list[str] = field(default_factory=list)
    """Things to tell the operator once at start (search disabled, demo model, ...)."""
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    mcp: MCPTools | None = None
    """The MCP servers, when any is configured; connected by ``start``."""
    _started: bool = False
    catalogue: dict[str, ChatModel] = field(default_factory=dict)
    """The models a channel or a question may pick (``models:``), by catalogue name."""
    room: Room = field(default_factory=lambda: _build_room(None))
    """The process's room for runs, shared by every surface it serves
    (``agent.max_concurrent_runs``, ``ops.max_loop_lag``; ``adapters.room``)."""
    hearing: Hearing = field(default_factory=lambda: _no_hearing())
    """Voice notes heard before their run (``stt.*``), on every surface (``bot.voice``)."""

    @property
    def health(self) -> StoreHealth | None:
        """Whether the shared store (Redis) answered lately; None without one."""
        return self.stores.health

    def export(self, trace: Trace, path: Path) -> Path:
        """Write ``trace`` as JSON (``.json``) or Markdown (``.md``) to ``path``."""
        from bot.trace_commands import export_trace

        return export_trace(trace, path)

    @property
    def redis_client(self) -> Redis | None:
        """The shared store's client, when one is configured."""
        client: Redis | None = self.stores.client
        return client

    file_readers: FileReaders = field(default_factory=FileReaders)
    """The worker processes that read attached files (``files.max_parallel``, ...)."""

    @property
    def files_enabled(self) -> bool:
        return self.config.files.enabled

    def file_limits(self) -> FileLimits:
        files = self.config.files
        return FileLimits(
            max_bytes=files.max_bytes,
            max_per_question=files.max_per_question,
            max_chars_per_conversation=files.max_chars_per_conversation,
            allowed_types=frozenset(files.allowed_types),
        )

    platforms: dict[str, PlatformLink] = field(default_factory=dict)
    """The platforms ``serve`` started, by name (``discord``, ``slack``)."""
    scheduling: Joining | None = None
    """Scheduled questions while ``serve`` runs (``bot.scheduling``): each surface adds its
    port to the runner and answers the commands through the desk."""

    def rate_budget(self, name: str, *, limit: int, per: float = 60.0) -> Budget | None:
        """A rate budget every process shares (in Redis), or None without Redis."""
        if self.redis_client is None:
            return None
        from adapters.pacing import CheckedBudget
        from core.stores.redis import RedisRateBudget

        shared = RedisRateBudget(
            self.redis_client, name, limit=limit, per=per, prefix=self.config.redis.prefix
        )
        return shared if self.health is None else CheckedBudget(shared, self.health)

    def channel_choices(self) -> ChannelChoices:
        """Each channel's model, persona and tools, over the shared channel settings."""
        from adapters.channels import ChannelChoices

        return ChannelChoices(
            self.stores.channel_settings,
            self.catalogue,
            self.tools,
            default_model=self.model.name,
            vision=frozenset(n for n, entry in self.config.models.items() if entry.vision),
            default_vision=self.config.model.vision and self.config.model_configured,
            no_memory=frozenset(n for n, entry in self.config.models.items() if not entry.memory),
        )

    @classmethod
    def create(cls, config: Config, *, demo_delay: float = 0.0) -> App:
        closers: list[Callable[[], Awaitable[None]]] = []
        notes: list[str] = []
        observers = _build_telemetry(config, notes, closers)  # first: it closes last
        model = _build_model(config, notes, closers, demo_delay)
        stores = _build_stores(config, closers)
        tools = _build_tools(config, notes, closers, redis_client=stores.client)
        mcp = _build_mcp(config, tools, closers)
        broker = ApprovalBroker(stores.decisions, stores.pending)
        closers.append(broker.aclose)
        approval = config.agent.approval
        agent = Agent(
            model,
            tools,
            stores=stores,
            approve=broker,
            observers=observers,
            answer_model=_build_answer_model(config, closers),
            compactor=_build_compactor(config, model),
            prices=model_prices(config),
            memories=_build_memories(config, stores),
            settings=AgentSettings(
                max_steps=config.agent.max_steps,
                # A backstop behind the SDK's own read timeout (which it retries): connect
                # time plus a margin, so the client's retry always gets its chance first.
                model_timeout=config.model.request_timeout + STALL_MARGIN,
                tool_timeout=_tool_timeout(config),
                deadline=config.agent.deadline,
                format_retries=config.agent.format_retries,
                observation_limit=config.agent.observation_limit,
                store_steps=config.redis.store_steps,
                max_question_chars=config.agent.max_question_chars,
                attachment_max_bytes=config.files.max_bytes,
                mode=config.agent.mode,
                parallel_tools=config.agent.parallel_tools,
                approval_timeout=approval.timeout,
                approval_tools=frozenset(name.lower() for name in approval.tools),
                approval_remember=approval.remember,
            ),
        )
        if config.log_format == "json":  # a run's log lines name the run
            agent.observers.append(RunLogContext())
        return cls(
            config=config,
            agent=agent,
            model=model,
            tools=tools,
            stores=stores,
            broker=broker,
            budgets=_build_budgets(config, stores),
            notes=notes,
            _closers=closers,
            mcp=mcp,
            catalogue=_build_catalogue(config, notes, closers),
            file_readers=_build_file_readers(config, closers),
            room=_build_room(config),
            hearing=_build_hearing(config, notes, closers),
        )

    async def start(self) -> None:
        """Connect the MCP servers and list their tools (each at once, bounded by
        ``tools.mcp.timeout``). A server that does not start becomes a note; the others
        work. Idempotent."""
        if self._started:
            return
        self._started = True
        await self._check_eviction_policy()
        if self.mcp is not None:
            self.notes.extend(await self.mcp.start())

    async def _check_eviction_policy(self) -> None:
        """One warning when the server's ``maxmemory-policy`` may evict event claims and
        locks (issue 26: a redelivered event was answered twice); nothing when it cannot be
        read (CONFIG refused, Redis away)."""
        shared = self.stores.shared
        if shared is None:
            return
        from core.stores.redis import evicts_what_guards_correctness

        policy = await shared.eviction_policy()
        if policy is not None and evicts_what_guards_correctness(policy):
            log.warning(
                "%s has maxmemory-policy %s: when it fills up it may evict event claims, "
                "conversation locks and run slots (they have TTLs), and a redelivered event "
                "could be answered twice; set maxmemory-policy noeviction",
                shared.address,
                policy,
            )

    async def aclose(self) -> None:
        self.room.stop()
        for close in reversed(self._closers):
            try:
                await close()
            except Exception:  # closing must go on for the others
                log.exception("error while shutting down")


def _build_hearing(
    config: Config, notes: list[str], closers: list[Callable[[], Awaitable[None]]]
) -> Hearing:
    from bot.voice import build_hearing  # the speech client loads only when configured

    return build_hearing(config, notes, closers)


def _no_hearing() -> Hearing:
    from adapters.voice import Hearing

    return Hearing()


def _build_room(config: Config | None) -> Room:
    """One per process; its loop probe starts with the first surface served."""
    from adapters.room import Room
    from core.looplag import LoopLag

    if config is None:
        return Room(lag=LoopLag())
    return Room(config.agent.max_concurrent_runs, lag=LoopLag(), max_lag=config.ops.max_loop_lag)


def _build_telemetry(
    config: Config, notes: list[str], closers: list[Callable[[], Awaitable[None]]]
) -> list[RunObserver]:
    """OpenTelemetry, when an OTLP endpoint is configured: the SDK loads only then."""
    endpoint = config.telemetry.otlp_endpoint
    if endpoint is None:
        return []
    try:
        from bot import telemetry
    except ImportError as exc:
        if not (exc.name or "").startswith("opentelemetry"):
            raise
        notes.append(
            "Tracing is off: telemetry.otlp_endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT) is set "
            "but the OpenTelemetry SDK is not installed; pip install 'reactbot[otel]'."
        )
        return []
    from bot.logs import RedactSecrets, secret_values

    tracer, shutdown = telemetry.start_tracing(telemetry.traces_endpoint(endpoint))
    closers.append(shutdown)
    if config.model_configured:
        provider = telemetry.Provider.openai_compatible(config.model.base_url)
    else:
        provider = telemetry.Provider(telemetry.DEMO_PROVIDER, in_process=True)
    capture = None
    if config.telemetry.capture_content:
        capture = telemetry.Capture(RedactSecrets(secret_values(config)).redact)
    return [telemetry.Telemetry(tracer, provider, capture=capture)]


def _build_model(
    config: Config,
    notes: list[str],
    closers: list[Callable[[], Awaitable[None]]],
    demo_delay: float,
) -> ChatModel:
    if not config.model_configured:
        notes.append(
            "No model configured: using the offline demo model (arithmetic and questions about "
            "reactbot only). Set REACTBOT_MODEL and OPENAI_API_KEY (or OPENAI_BASE_URL) for a "
            "real one."
        )
        return DemoModel(delay=demo_delay)
    if config.secrets.openai_api_key is None and not config.model.base_url:
        notes.append(
            f"REACTBOT_MODEL names {config.model.name!r}, but neither OPENAI_API_KEY nor "
            "OPENAI_BASE_URL is set, so no question can be answered: set OPENAI_API_KEY for "
            "OpenAI, or OPENAI_BASE_URL for another OpenAI-compatible server."
        )
    # The steps run on the small model when one is configured.
    return openai_model(config, config.model.step_model or config.model.name, closers)


def _build_catalogue(
    config: Config, notes: list[str], closers: list[Callable[[], Awaitable[None]]]
) -> dict[str, ChatModel]:
    catalogue: dict[str, ChatModel] = {}
    for name, entry in config.models.items():
        key = config.secrets.openai_api_key
        if entry.api_key_env is not None:
            # Only the variable the entry names: OPENAI_API_KEY is never sent to its endpoint.
            key = config.secrets.models.get(entry.api_key_env)
            if key is None:
                notes.append(f"models.{name}: {entry.api_key_env} is not set")
        catalogue[name] = openai_model(
            config, entry.name, closers, base_url=entry.base_url, key=key, default_key=False
        )
    return catalogue


def _build_answer_model(
    config: Config, closers: list[Callable[[], Awaitable[None]]]
) -> ChatModel | None:
    """``answer_model``, else ``name`` when the steps run on a separate ``step_model``."""
    settings = config.model
    name = settings.answer_model or (settings.name if settings.step_model else None)
    if not config.model_configured or not name or name == settings.step_model:
        return None
    return openai_model(config, name, closers)


def _build_compactor(config: Config, steps_model: ChatModel) -> HistoryCompactor | None:
    """Summaries of old turns are written by the steps' (small) model."""
    if not config.model_configured:
        return None  # the demo model cannot summarise; history is bounded by turns anyway
    return HistoryCompactor(steps_model, budget_tokens=config.agent.history_token_budget)


def _build_tools(
    config: Config,
    notes: list[str],
    closers: list[Callable[[], Awaitable[None]]],
    *,
    redis_client: Redis | None,
) -> ToolRegistry:
    registry = ToolRegistry()
    tools = config.tools
    if tools.search.enabled:
        key = config.secrets.tavily_api_key
        if key is None:
            notes.append("Web search is disabled: set TAVILY_API_KEY to enable the search tool.")
        else:
            search_tool = _search_tool(config, key.get_secret_value(), redis_client)
            closers.append(search_tool.aclose)
            registry.add(search_tool)
    if tools.calculate.enabled:
        calculator = CalculatorTool(timeout=tools.calculate.timeout)
        closers.append(calculator.aclose)
        registry.add(calculator)
    if tools.lookup.enabled:
        from core.knowledge import LookupTool

        embeddings = _embeddings(config, notes)
        if embeddings is not None:
            closers.append(embeddings.aclose)
        registry.add(
            LookupTool(
                tools.lookup.folders,
                manual=KNOWLEDGE_DIR,
                refresh_interval=tools.lookup.refresh_seconds,
                embeddings=embeddings,
            )
        )
    return registry


def _embeddings(config: Config, notes: list[str]) -> Hybrid | None:
    """The lookup's dense half (``tools.lookup.embeddings``), or None: BM25 alone."""
    wanted = config.tools.lookup.embeddings
    if wanted.model is None:
        return None
    key = None
    if wanted.api_key_env is not None:
        secret = config.secrets.models.get(wanted.api_key_env)
        key = None if secret is None else secret.get_secret_value()
    if key is None and wanted.base_url is None:
        variable = wanted.api_key_env or "the variable tools.lookup.embeddings.api_key_env names"
        notes.append(f"Hybrid lookup is off (BM25 alone): set {variable} for the embeddings.")
        return None
    from core.embeddings import Hybrid, OpenAIEmbedder, VectorCache

    embedder = OpenAIEmbedder(wanted.model, base_url=wanted.base_url, api_key=key)
    return Hybrid(VectorCache(embedder))


def _tool_timeout(config: Config) -> float:
    """The agent's limit per tool call: with MCP servers, long enough for their own."""
    if not config.tools.mcp.enabled:
        return config.agent.tool_timeout
    return max(config.agent.tool_timeout, config.tools.mcp.timeout + MCP_MARGIN)


def _build_mcp(
    config: Config, registry: ToolRegistry, closers: list[Callable[[], Awaitable[None]]]
) -> MCPTools | None:
    servers = config.tools.mcp.enabled
    if not servers:
        return None
    from core.tools.mcp import CONNECT_TIMEOUT, MCPTools

    timeout = config.tools.mcp.timeout
    mcp = MCPTools(
        registry,
        [_server_spec(server, config) for server in servers],
        timeout=timeout,
        connect_timeout=max(CONNECT_TIMEOUT, timeout),
    )
    closers.append(mcp.aclose)
    return mcp


def _server_spec(server: MCPServerConfig, config: Config) -> ServerSpec:
    from core.tools.mcp import HttpServer, ServerSpec, StdioServer

    values = {name: value.get_secret_value() for name, value in config.secrets.mcp.items()}
    missing = [name for name in server.variables if name not in values]
    problem = None
    if missing:
        names = " and ".join(dict.fromkeys(missing))
        problem = f"{names} {'is' if len(missing) == 1 else 'are'} not set in the environment"
    transport: StdioServer | HttpServer
    if server.command is not None:
        transport = StdioServer(
            command=server.command,
            args=server.args,
            cwd=str(server.cwd) if server.cwd is not None else None,
            env={name: values[name] for name in server.env_from if name in values},
        )
    else:
        assert server.url is not None  # the config allows exactly one of the two
        transport = HttpServer(
            url=server.url,
            headers={h: values[v] for h, v in server.headers_from.items() if v in values},
        )
    return ServerSpec(
        name=server.name,
        transport=transport,
        allow=frozenset(server.tools) if server.tools is not None else None,
        approval=server.approval,
        problem=problem,
    )


def _search_tool(config: Config, api_key: str, redis_client: Redis | None) -> SearchTool:
    from core.tools.search import InMemorySearchCache, SearchCache, SearchTool

    search = config.tools.search
    cache: SearchCache
    if redis_client is not None:
        from core.stores.redis import RedisSearchCache

        cache = RedisSearchCache(redis_client, prefix=f"{config.redis.prefix}search:")
    else:
        cache = InMemorySearchCache()
    return SearchTool(
        api_key=api_key,
        api_base_url=search.api_base_url,
        max_results=search.max_results,
        include_answer=search.include_answer,
        timeout=search.timeout,
        cache=cache,
        cache_ttl=search.cache_ttl,
    )


def _build_file_readers(
    config: Config, closers: list[Callable[[], Awaitable[None]]]
) -> FileReaders:
    files = config.files
    readers = FileReaders(
        max_parallel=files.max_parallel,
        parse_seconds=files.parse_seconds,
        parse_memory_mb=files.parse_memory_mb,
    )
    closers.append(readers.aclose)  # workers start on the first file, end with the app
    return readers


def _build_budgets(config: Config, stores: Stores) -> TokenBudgets:
    budgets = config.budgets
    return TokenBudgets(
        stores.usage,
        per_user=budgets.tokens_per_user_per_day,
        per_channel=budgets.tokens_per_channel_per_day,
        usd_per_user=budgets.usd_per_user_per_day,
        usd_per_channel=budgets.usd_per_channel_per_day,
        reserve_usd=budgets.reserve_usd,
        reserve_tokens=budgets.reserve_tokens,
    )


def longest_run(config: Config) -> float:
    """The longest a healthy run may take, with a minute to spare: its deadline, plus a full
    approval timeout for every action it may take (the deadline stands still while a person
    decides). Leases are renewed up to this, so a hung run frees its conversation after it."""
    agent = config.agent
    actions = agent.max_steps * max(1, agent.parallel_tools)
    return agent.deadline + 60 + actions * agent.approval.timeout


def redis_target(redis: RedisConfig) -> RedisTarget:
    """Where ``redis.*`` says the stores live: one server, a Sentinel-managed primary or a
    Cluster, over TLS with ``rediss://``."""
    from core.stores.redis import RedisTarget, parse_host_port

    def path(value: Path | None) -> str | None:
        return str(value) if value is not None else None

    return RedisTarget(
        url=redis.url,
        sentinels=tuple(parse_host_port(s) for s in redis.sentinels),
        sentinel_service=redis.sentinel_service,
        cluster=redis.cluster,
        tls_ca_file=path(redis.tls_ca_file),
        tls_cert_file=path(redis.tls_cert_file),
        tls_key_file=path(redis.tls_key_file),
        tls_check_hostname=redis.tls_check_hostname,
    )


def _build_memories(config: Config, stores: Stores) -> Memories | None:
    """What people ask the bot to remember (``memory.*``), in the bundle's store; without
    Redis they last only as long as this process, and the start says so in the log."""
    if not config.memory.enabled:
        return None
    if not config.redis.configured:
        log.info("memories are kept in this process only (no redis.url): a restart forgets them")
    return Memories(stores.memories, config.memory.settings())


def _build_stores(config: Config, closers: list[Callable[[], Awaitable[None]]]) -> Stores:
    redis = config.redis
    lease = config.agent.lease_seconds  # a crashed holder frees its conversation by then
    longest = longest_run(config)  # a live holder renews its lease for up to this
    if not redis.configured:
        return Stores.in_memory(
            max_turns=redis.history_turns, lock_lease=lease, lock_hold_at_most=longest
        )
    stores = Stores.redis(
        redis_target(redis),
        prefix=redis.prefix,
        max_turns=redis.history_turns,
        history_ttl=int(redis.history_ttl_days * 86400),
        store_steps=redis.store_steps,
        trace_ttl=int(redis.trace_ttl_days * 86400),
        max_traces=redis.max_traces,
        max_trace_bytes=redis.max_trace_bytes,
        lock_lease=lease,
        lock_hold_at_most=longest,
    )
    closers.append(stores.aclose)
    # While Redis is away the bot answers without memory (and says so), keeps traces and
    # claims in this process, and skips Redis for a few seconds so a hung server costs one
    # timeout, not one per call.
    return stores.resilient(lock_lease=lease, lock_hold_at_most=longest)
