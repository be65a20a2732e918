"""Wiring: turns a Config into a ready Agent with its model, tools and stores.

Nothing here runs at import time; ``App.create`` is called once by the CLI and ``aclose``
releases what it opened (model client, calculator worker, Redis connection).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bot.config import Config
from core.agent import Agent, AgentSettings
from core.demo import DemoModel
from core.history import HistoryStore, InMemoryHistoryStore
from core.llm import ChatModel
from core.stores import (
    ConversationLocks,
    EventClaims,
    InMemoryEventClaims,
    InMemoryLocks,
    InMemoryTraceStore,
    TraceStore,
)
from core.tools import ToolRegistry
from core.tools.calculator import CalculatorTool

if TYPE_CHECKING:  # the search and redis modules load only when configured
    from core.tools.search import SearchTool

log = logging.getLogger(__name__)

KNOWLEDGE_DIR = Path(__file__).parent / "knowledge"


@dataclass
class App:
    config: Config
    agent: Agent
    model: ChatModel
    tools: ToolRegistry
    history: HistoryStore
    traces: TraceStore
    locks: ConversationLocks
    claims: EventClaims
    notes: list[str] = field(default_factory=list)
    """Things to tell the operator once at start (search disabled, demo model, ...)."""
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    @classmethod
    def create(cls, config: Config, *, demo_delay: float = 0.0) -> App:
        closers: list[Callable[[], Awaitable[None]]] = []
        notes: list[str] = []
        model = _build_model(config, notes, closers, demo_delay)
        history, traces, locks, claims = _build_stores(config, notes, closers)
        tools = _build_tools(config, notes, closers, redis_client=getattr(history, "client", None))
        agent = Agent(
            model,
            tools,
            history=history,
            traces=traces,
            locks=locks,
            settings=AgentSettings(
                max_steps=config.agent.max_steps,
                model_timeout=config.model.request_timeout,
                tool_timeout=config.agent.tool_timeout,
                deadline=config.agent.deadline,
                format_retries=config.agent.format_retries,
                observation_limit=config.agent.observation_limit,
            ),
        )
        return cls(config, agent, model, tools, history, traces, locks, claims, notes, closers)

    async def aclose(self) -> None:
        for close in reversed(self._closers):
            try:
                await close()
            except Exception:  # closing must go on for the others
                log.exception("error while shutting down")


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
    from core.openai_model import OpenAIChatModel

    key = config.secrets.openai_api_key
    model = OpenAIChatModel(
        model=config.model.name,
        base_url=config.model.base_url,
        api_key=key.get_secret_value() if key else None,
        request_timeout=config.model.request_timeout,
        max_retries=config.model.max_retries,
        temperature=config.model.temperature,
    )
    closers.append(model.aclose)
    return model


def _build_tools(
    config: Config,
    notes: list[str],
    closers: list[Callable[[], Awaitable[None]]],
    *,
    redis_client: object | None,
) -> ToolRegistry:
    registry = ToolRegistry()
    tools = config.tools
    if tools.search.enabled:
        key = config.secrets.tavily_api_key
        if key is None:
            notes.append("Web search is disabled: set TAVILY_API_KEY to enable the search tool.")
        else:
            registry.add(_search_tool(config, key.get_secret_value(), redis_client))
    if tools.calculate.enabled:
        calculator = CalculatorTool(timeout=tools.calculate.timeout)
        closers.append(calculator.aclose)
        registry.add(calculator)
    if tools.lookup.enabled:
        from core.tools.lookup import LookupTool

        registry.add(
            LookupTool(
                tools.lookup.path or KNOWLEDGE_DIR, refresh_interval=tools.lookup.refresh_seconds
            )
        )
    return registry


def _search_tool(config: Config, api_key: str, redis_client: object | None) -> SearchTool:
    from core.tools.search import InMemorySearchCache, RedisSearchCache, SearchCache, SearchTool

    search = config.tools.search
    cache: SearchCache
    if redis_client is not None:
        cache = RedisSearchCache(redis_client, prefix=f"{config.redis.prefix}search:")  # type: ignore[arg-type]
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


def _build_stores(
    config: Config,
    notes: list[str],
    closers: list[Callable[[], Awaitable[None]]],
) -> tuple[HistoryStore, TraceStore, ConversationLocks, EventClaims]:
    redis = config.redis
    if redis.url is None:
        return (
            InMemoryHistoryStore(max_turns=redis.history_turns),
            InMemoryTraceStore(),
            InMemoryLocks(),
            InMemoryEventClaims(),
        )
    from core.redis_store import connect
    from core.resilient import ResilientEventClaims, ResilientLocks, ResilientTraceStore

    stores = connect(
        redis.url,
        prefix=redis.prefix,
        max_turns=redis.history_turns,
        history_ttl=int(redis.history_ttl_days * 86400),
        store_steps=redis.store_steps,
        trace_ttl=int(redis.trace_ttl_days * 86400),
    )
    closers.append(stores.aclose)
    # History failures are caught by the agent (it tells the user "memory unavailable");
    # traces, locks and claims fall back to this process while Redis is away.
    return (
        stores.history,
        ResilientTraceStore(stores.traces),
        ResilientLocks(stores.locks),
        ResilientEventClaims(stores.claims),
    )
