"""SearchTool with the real tavily-python client against a local fake Tavily over real HTTP."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio as aioredis

from core.errors import ToolError, ToolTimeout
from core.tools import Tool, ToolResult
from core.tools.search import (
    CACHE_OP_TIMEOUT,
    InMemorySearchCache,
    RedisSearchCache,
    SearchCache,
    SearchTool,
)
from tests.fakes.tavily_server import FakeTavily, Reply

API_KEY = "tvly-test-0123456789secret"

ToolFactory = Callable[..., SearchTool]


@pytest.fixture
async def fake() -> AsyncIterator[FakeTavily]:
    async with FakeTavily(api_key=API_KEY) as server:
        yield server


@pytest.fixture
async def make_tool(fake: FakeTavily) -> AsyncIterator[ToolFactory]:
    tools: list[SearchTool] = []

    def make(**options: object) -> SearchTool:
        settings: dict[str, object] = {"api_key": API_KEY, "api_base_url": fake.base_url}
        settings.update(options)
        tool = SearchTool(**settings)  # type: ignore[arg-type]
        tools.append(tool)
        return tool

    yield make
    for tool in tools:
        await tool.aclose()


async def failure_text(tool: SearchTool, query: str = "anything") -> str:
    with pytest.raises(ToolError) as caught:
        await tool.run(query)
    text = str(caught.value)
    assert API_KEY not in text
    assert API_KEY not in repr(caught.value)
    return text


def test_search_tool_satisfies_the_tool_protocol() -> None:
    tool = SearchTool(api_key=API_KEY)
    assert isinstance(tool, Tool)
    assert (tool.name, tool.example) == ("search", "search[2022 World Cup final score]")
    assert API_KEY not in repr(tool)


async def test_results_are_formatted_compactly_with_every_url_as_a_source(
    fake: FakeTavily, make_tool: ToolFactory
) -> None:
    long_snippet = "word " * 200
    fake.enqueue(
        Reply.ok(
            [
                {"title": "First", "url": "https://a.example/1", "content": "alpha", "score": 0.9},
                {"title": "Second", "url": "https://b.example/2", "content": long_snippet},
                {"title": "Third", "url": "https://c.example/3", "content": "gamma", "score": 0.5},
            ],
            answer="The short answer.",
        )
    )
    result = await make_tool().run("2022 World Cup final score")

    assert isinstance(result, ToolResult)
    assert result.sources == ("https://a.example/1", "https://b.example/2", "https://c.example/3")
    lines = result.text.splitlines()
    assert lines[:5] == [
        "Answer: The short answer.",
        "",
        "1. First",
        "   https://a.example/1",
        "   alpha",
    ]
    assert "2. Second" in lines and "3. Third" in lines
    snippet = lines[lines.index("2. Second") + 2].strip()
    assert snippet.endswith("…") and len(snippet) <= 300


async def test_the_request_carries_key_query_and_options_as_tavily_python_sends_them(
    fake: FakeTavily, make_tool: ToolFactory
) -> None:
    await make_tool(max_results=2, include_answer=False).run("  who won   in 2022? ")

    [request] = fake.requests
    assert (request.method, request.path) == ("POST", "/search")
    assert request.headers["Authorization"] == f"Bearer {API_KEY}"
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["X-Client-Source"] == "tavily-python"
    assert request.body == {"query": "who won in 2022?", "max_results": 2, "include_answer": False}


async def test_answer_is_left_out_when_disabled(make_tool: ToolFactory) -> None:
    result = await make_tool(include_answer=False).run("world cup")
    assert not result.text.startswith("Answer:")
    assert result.text.startswith("1. 2022 FIFA World Cup final")


async def test_a_wrong_key_is_reported_without_the_key(
    fake: FakeTavily, make_tool: ToolFactory
) -> None:
    wrong = "tvly-wrong-key-987654321"
    tool = make_tool(api_key=wrong)
    with pytest.raises(ToolError) as caught:
        await tool.run("anything")
    assert str(caught.value) == "search is unavailable: the search API key was rejected"
    assert wrong not in str(caught.value)
    assert fake.requests[0].headers["Authorization"] == f"Bearer {wrong}"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply.error(401), "search is unavailable: the search API key was rejected"),
        (Reply.error(403), "search is unavailable: the search API key was rejected"),
        (Reply.error(429), "search is unavailable: the provider rate-limited us; try again later"),
        (Reply.error(432), "search is unavailable: the search plan's usage limit is reached"),
        (Reply.error(500), "search is unavailable: the provider had an error (HTTP 500)"),
        (Reply.error(502), "search is unavailable: the provider had an error (HTTP 502)"),
        (Reply.error(503), "search is unavailable: the provider had an error (HTTP 503)"),
    ],
)
async def test_provider_errors_become_clear_tool_errors(
    fake: FakeTavily, make_tool: ToolFactory, reply: Reply, expected: str
) -> None:
    fake.enqueue(reply)
    assert await failure_text(make_tool()) == expected


async def test_a_provider_error_echoing_the_key_does_not_leak_it(
    fake: FakeTavily, make_tool: ToolFactory
) -> None:
    fake.enqueue(Reply.error(400, f"bad query for key {API_KEY}"))
    text = await failure_text(make_tool())
    assert text.startswith("search failed: the provider refused the query")
    assert "***" in text


async def test_a_slow_provider_times_out(fake: FakeTavily, make_tool: ToolFactory) -> None:
    fake.enqueue(Reply.slow(5.0))
    with pytest.raises(ToolTimeout) as caught:
        await make_tool(timeout=0.3).run("anything")
    assert str(caught.value) == "search is unavailable: the provider did not answer in 0.3 s"


async def test_an_unreachable_provider_is_a_tool_error(fake: FakeTavily) -> None:
    base_url = fake.base_url
    await fake.close()
    tool = SearchTool(api_key=API_KEY, api_base_url=base_url, timeout=2)
    try:
        assert await failure_text(tool) == "search is unavailable: could not reach the provider"
    finally:
        await tool.aclose()


async def test_empty_results(fake: FakeTavily, make_tool: ToolFactory) -> None:
    fake.enqueue(Reply.empty())
    assert await failure_text(make_tool(), "qwzx flurb") == "no results for 'qwzx flurb'"


@pytest.mark.parametrize("query", ["", "   ", '""'])
async def test_an_empty_query_is_refused_without_a_request(
    fake: FakeTavily, make_tool: ToolFactory, query: str
) -> None:
    assert "search needs a query" in await failure_text(make_tool(), query)
    assert fake.requests == []


def test_an_empty_key_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="TAVILY_API_KEY"):
        SearchTool(api_key=" ")


async def test_identical_queries_come_from_the_cache(
    fake: FakeTavily, make_tool: ToolFactory
) -> None:
    tool = make_tool()
    first = await tool.run("World Cup final")
    second = await tool.run("  world   CUP final ")
    assert second == first
    assert len(fake.requests) == 1
    await tool.run("a different question")
    assert len(fake.requests) == 2


async def test_failures_are_not_cached(fake: FakeTavily, make_tool: ToolFactory) -> None:
    fake.enqueue(Reply.error(502))
    tool = make_tool()
    await failure_text(tool)
    await tool.run("anything")
    assert len(fake.requests) == 2


async def test_cache_entries_expire(fake: FakeTavily, make_tool: ToolFactory) -> None:
    now = [1000.0]
    tool = make_tool(cache=InMemorySearchCache(clock=lambda: now[0]), cache_ttl=60)
    await tool.run("q")
    now[0] += 59
    await tool.run("q")
    assert len(fake.requests) == 1
    now[0] += 2
    await tool.run("q")
    assert len(fake.requests) == 2


async def test_zero_ttl_disables_the_cache(fake: FakeTavily, make_tool: ToolFactory) -> None:
    tool = make_tool(cache_ttl=0)
    await tool.run("q")
    await tool.run("q")
    assert len(fake.requests) == 2


async def test_in_memory_cache_is_bounded() -> None:
    cache = InMemorySearchCache(max_entries=2)
    for key in ("a", "b", "c"):
        await cache.set(key, ToolResult(key), ttl=60)
    assert len(cache) == 2
    assert await cache.get("a") is None
    assert await cache.get("c") == ToolResult("c")


class BrokenCache:
    async def get(self, key: str) -> ToolResult | None:
        raise ConnectionError("cache down")

    async def set(self, key: str, value: ToolResult, ttl: float) -> None:
        raise ConnectionError("cache down")


async def test_a_failing_cache_never_fails_the_search(
    fake: FakeTavily, make_tool: ToolFactory, caplog: pytest.LogCaptureFixture
) -> None:
    cache: SearchCache = BrokenCache()
    with caplog.at_level(logging.WARNING, logger="core.tools.search"):
        result = await make_tool(cache=cache).run("q")
    assert result.sources
    assert "search cache read failed" in caplog.text
    assert "search cache write failed" in caplog.text


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url)
    yield client
    await client.aclose()


async def test_redis_cache_is_shared_between_tools(
    fake: FakeTavily, make_tool: ToolFactory, redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    first = await make_tool(cache=RedisSearchCache(redis_client, redis_prefix)).run("q")
    # A second tool (another bot process, say) with its own Redis connection.
    second = await make_tool(cache=RedisSearchCache(redis_client, redis_prefix)).run(" Q ")

    assert second == first
    assert len(fake.requests) == 1
    [key] = [k async for k in redis_client.scan_iter(match=redis_prefix + "*")]
    ttl_ms = await redis_client.pttl(key)
    assert 3_500_000 < ttl_ms <= 3_600_000


async def test_redis_cache_ignores_entries_it_did_not_write(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    cache = RedisSearchCache(redis_client, redis_prefix)
    await redis_client.set(redis_prefix + "k", "not json")
    assert await cache.get("k") is None
    await cache.set("k", ToolResult("text", ("https://a.example",)), ttl=60)
    assert await cache.get("k") == ToolResult("text", ("https://a.example",))


async def test_a_dead_redis_does_not_fail_the_search(
    fake: FakeTavily, make_tool: ToolFactory, caplog: pytest.LogCaptureFixture
) -> None:
    # Port 1 on localhost: nothing listens there, so every command fails to connect.
    # redis-py retries with backoff by default; the tool bounds each cache call anyway.
    dead = aioredis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    started = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING, logger="core.tools.search"):
            result = await make_tool(cache=RedisSearchCache(dead, "x:")).run("q")
    finally:
        await dead.aclose()
    assert result.sources
    # Unbounded, one cache call on this dead Redis takes ~4.7 s (redis-py retries with
    # backoff); bounded, both take 2 x CACHE_OP_TIMEOUT. The 2.5 s margin is for a loaded
    # machine (4 test processes on 2 cores took 1.76 s), and still fails an unbounded call.
    assert time.monotonic() - started < 2 * CACHE_OP_TIMEOUT + 2.5
    assert "search cache read failed" in caplog.text
