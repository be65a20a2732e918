"""Shared fixtures. Integration tests use a real Redis: ``REDIS_URL`` or 127.0.0.1:6379.

Every test run gets its own key prefix, and only keys under it are deleted afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest

import tests.properties  # noqa: F401  (loads the Hypothesis profile: HYPOTHESIS_PROFILE)


@pytest.fixture
def redis_url() -> str:
    return os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
async def redis_prefix(redis_url: str) -> AsyncIterator[str]:
    """A unique key prefix; keys under it are removed after the test."""
    import redis.asyncio as aioredis

    prefix = f"reactbot-test:{uuid.uuid4().hex[:10]}:"
    yield prefix
    client = aioredis.from_url(redis_url)
    try:
        keys = [k async for k in client.scan_iter(match=prefix + "*", count=500)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()
