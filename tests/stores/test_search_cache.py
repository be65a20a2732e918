"""Conformance: the search tool's cache, the same on every backend. It has no resilient
wrapper of its own (``SearchTool`` takes a failing cache for a miss): the resilient
backends run it on what they wrap."""

from __future__ import annotations

from core.tools import ToolResult
from tests.stores.conformance import SHORT, Backend

RESULT = ToolResult(
    text="Answer: ☃\n\n1. A page\n   https://a.example/", sources=("https://a.example/",)
)


class TestSearchCache:
    async def test_a_result_is_shared_until_its_ttl_runs_out(self, backend: Backend) -> None:
        here, there = backend.caches
        assert await here.get("v1:q") is None
        await here.set("v1:q", RESULT, ttl=SHORT)
        await here.set("v1:other", RESULT, ttl=60)
        await backend.advance(SHORT + 0.1)
        assert await there.get("v1:q") is None
        assert await there.get("v1:other") == RESULT

    async def test_a_result_without_time_to_live_is_not_kept(self, backend: Backend) -> None:
        here, there = backend.caches
        await here.set("v1:q", RESULT, ttl=0)
        assert await there.get("v1:q") is None
