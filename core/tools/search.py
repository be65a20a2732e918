"""``search[query]``: the live web through Tavily, with a cache in front.

The tool talks to Tavily through tavily-python's ``AsyncTavilyClient``, which POSTs the JSON
body to ``{api_base_url}/search`` with ``Authorization: Bearer <key>``. The base URL is the
client's own ``api_base_url`` constructor parameter (tavily-python >= 0.7), so proxies,
self-hosted gateways and the test fake are reached without patching anything.

Provider failures are mapped to ``ToolError`` here, at the boundary, with text written for the
model and the person reading the trace; the API key never appears in any of it.

Identical queries (after normalisation) within ``cache_ttl`` seconds come from a ``SearchCache``:
``InMemorySearchCache`` for one process, ``RedisSearchCache`` when several processes share a
Redis (both in ``core.stores``, named here too). A cache that fails or hangs only costs the
cache: the search goes on without it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from core.errors import ToolError, ToolTimeout
from core.stores.memory import InMemorySearchCache
from core.stores.protocols import SearchCache
from core.tools import ToolDisplay, ToolHints, ToolResult

if TYPE_CHECKING:
    from core.stores.redis.search_cache import RedisSearchCache

__all__ = ["InMemorySearchCache", "RedisSearchCache", "SearchCache", "SearchTool"]

logger = logging.getLogger(__name__)

SNIPPET_CHARS = 300
TITLE_CHARS = 150
MAX_QUERY_CHARS = 400  # Tavily refuses longer queries with a 400; say so before sending.
CACHE_OP_TIMEOUT = 0.5  # a hanging cache must not eat the search's own time budget
_CACHE_KEY_VERSION = "v1"


def __getattr__(name: str) -> object:
    """``RedisSearchCache`` moved to ``core.stores.redis``; loaded only when asked for, so a
    search without Redis never imports redis."""
    if name == "RedisSearchCache":
        from core.stores.redis.search_cache import RedisSearchCache

        return RedisSearchCache
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class SearchTool:
    """Web search through Tavily: a short answer plus the top results with title, URL, snippet."""

    name = "search"
    display = ToolDisplay("🔎", "Searching")
    description = (
        "searches the web and returns the top results (title, URL, snippet) and a short answer. "
        "Use it for current events and facts you are not sure of."
    )
    example = "search[2022 World Cup final score]"
    input_name = "query"
    hints = ToolHints(read_only=True, destructive=False, open_world=True)

    def __init__(
        self,
        *,
        api_key: str,
        api_base_url: str | None = None,
        max_results: int = 3,
        include_answer: bool = True,
        timeout: float = 10,
        cache: SearchCache | None = None,
        cache_ttl: float = 3600,
    ) -> None:
        if not api_key.strip():
            # tavily-python would silently switch to its keyless mode on an empty key.
            raise ValueError("SearchTool needs a Tavily API key (TAVILY_API_KEY)")
        if not 1 <= max_results <= 20:
            raise ValueError("max_results must be between 1 and 20")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self._api_key = api_key
        self._api_base_url = api_base_url
        self._max_results = max_results
        self._include_answer = include_answer
        self._timeout = timeout
        self._cache: SearchCache = cache if cache is not None else InMemorySearchCache()
        self._cache_ttl = cache_ttl
        self._client: Any = None  # AsyncTavilyClient, created on first use

    def __repr__(self) -> str:
        # Spelled out so that the key can never end up in a log line through repr().
        return f"SearchTool(api_base_url={self._api_base_url!r}, max_results={self._max_results})"

    async def run(self, query: str) -> ToolResult:
        query = _clean_query(query)
        key = self._cache_key(query)
        cached = await self._cache_get(key)
        if cached is not None:
            return cached
        response = await self._ask_provider(query)
        result = self._format(query, response)
        await self._cache_set(key, result)
        return result

    async def aclose(self) -> None:
        """Closes the HTTP connection pool, if one was opened."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    def _tavily(self) -> Any:
        if self._client is None:
            # Imported here: tavily pulls in requests and more, and costs ~150 ms at import.
            from tavily import AsyncTavilyClient  # type: ignore[import-untyped]

            self._client = AsyncTavilyClient(api_key=self._api_key, api_base_url=self._api_base_url)
        return self._client

    async def _ask_provider(self, query: str) -> Mapping[str, Any]:
        client = self._tavily()
        try:
            # httpx's timeout is per read; the outer one bounds the whole call.
            async with asyncio.timeout(self._timeout):
                response = await client.search(
                    query,
                    max_results=self._max_results,
                    include_answer=self._include_answer,
                    timeout=self._timeout,
                )
        except Exception as exc:
            error = self._provider_error(exc)
            if error is None:
                raise
            raise error from exc
        if not isinstance(response, Mapping):
            raise ToolError("search is unavailable: the provider sent a malformed response")
        return response

    def _provider_error(self, exc: Exception) -> ToolError | None:
        """The ToolError for a provider failure, or None for anything that is our own bug."""
        # Imported here like tavily: importing httpx imports its command line (rich, click)
        # whenever click is installed, and core must not load rich.
        import httpx
        from tavily import errors as tavily_errors

        unavailable = "search is unavailable: "
        if isinstance(exc, TimeoutError | tavily_errors.TimeoutError | httpx.TimeoutException):
            return ToolTimeout(f"{unavailable}the provider did not answer in {self._timeout:g} s")
        if isinstance(exc, tavily_errors.InvalidAPIKeyError):
            return ToolError(f"{unavailable}the search API key was rejected")
        if isinstance(exc, tavily_errors.ForbiddenError):
            # tavily-python raises this for 403 and for Tavily's plan-limit codes 432/433.
            if "limit" in str(exc).lower():
                return ToolError(f"{unavailable}the search plan's usage limit is reached")
            return ToolError(f"{unavailable}the search API key was rejected")
        if isinstance(exc, tavily_errors.UsageLimitExceededError):
            return ToolError(f"{unavailable}the provider rate-limited us; try again later")
        if isinstance(exc, tavily_errors.BadRequestError):
            detail = self._scrub(_squash(str(exc), 200))
            return ToolError(f"search failed: the provider refused the query ({detail})")
        if isinstance(exc, httpx.HTTPStatusError):
            status = exc.response.status_code
            if status >= 500:
                return ToolError(f"{unavailable}the provider had an error (HTTP {status})")
            return ToolError(f"{unavailable}the provider answered HTTP {status}")
        if isinstance(exc, httpx.TransportError):
            return ToolError(f"{unavailable}could not reach the provider")
        if isinstance(exc, json.JSONDecodeError):
            return ToolError(f"{unavailable}the provider sent a malformed response")
        return None

    def _format(self, query: str, response: Mapping[str, Any]) -> ToolResult:
        results = [r for r in _as_list(response.get("results")) if isinstance(r, Mapping)]
        sources = _unique(str(r["url"]) for r in results if isinstance(r.get("url"), str))
        if not results:
            raise ToolError(f"no results for '{_squash(query, 100)}'")
        lines: list[str] = []
        answer = response.get("answer")
        if self._include_answer and isinstance(answer, str) and answer.strip():
            lines += [f"Answer: {_squash(answer, 2 * SNIPPET_CHARS)}", ""]
        for number, item in enumerate(results[: self._max_results], start=1):
            lines += _result_lines(number, item)
        return ToolResult(text=self._scrub("\n".join(lines)), sources=sources)

    def _cache_key(self, query: str) -> str:
        normalised = " ".join(unicodedata.normalize("NFKC", query).casefold().split())
        material = f"{self._max_results}|{self._include_answer}|{normalised}"
        return f"{_CACHE_KEY_VERSION}:{hashlib.sha256(material.encode()).hexdigest()}"

    async def _cache_get(self, key: str) -> ToolResult | None:
        if self._cache_ttl <= 0:
            return None
        try:
            async with asyncio.timeout(CACHE_OP_TIMEOUT):
                return await self._cache.get(key)
        except Exception as exc:  # any cache fault is a miss, never a failed search
            logger.warning("search cache read failed, searching anyway: %s", _describe(exc))
            return None

    async def _cache_set(self, key: str, value: ToolResult) -> None:
        if self._cache_ttl <= 0:
            return
        try:
            async with asyncio.timeout(CACHE_OP_TIMEOUT):
                await self._cache.set(key, value, self._cache_ttl)
        except Exception as exc:  # the result is still good; only the cache missed out
            logger.warning("search cache write failed: %s", _describe(exc))

    def _scrub(self, text: str) -> str:
        """Belt and braces: provider text echoed back to us must not carry the key."""
        return text.replace(self._api_key, "***")


def _clean_query(query: str) -> str:
    query = " ".join(query.split())
    # Models often quote the input: search["foo bar"].
    if len(query) >= 2 and query[0] == query[-1] and query[0] in "\"'":
        query = query[1:-1].strip()
    if not query:
        raise ToolError("search needs a query, e.g. search[2022 World Cup final score]")
    if len(query) > MAX_QUERY_CHARS:
        raise ToolError(f"the search query is too long: keep it under {MAX_QUERY_CHARS} characters")
    return query


def _result_lines(number: int, item: Mapping[str, Any]) -> list[str]:
    title = _squash(str(item.get("title") or "(untitled)"), TITLE_CHARS)
    lines = [f"{number}. {title}"]
    if isinstance(item.get("url"), str):
        lines.append(f"   {item['url']}")
    snippet = _squash(str(item.get("content") or ""), SNIPPET_CHARS)
    if snippet:
        lines.append(f"   {snippet}")
    return lines


def _squash(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters, cut at a word boundary when there is one."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.") + "…"


def _as_list(value: object) -> Sequence[object]:
    return value if isinstance(value, list) else []


def _unique(urls: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(urls))


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
