"""Shared fixtures. Integration tests use a real Redis: ``REDIS_URL`` or 127.0.0.1:6379.

Every test run gets its own key prefix, and only keys under it are deleted afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest

import tests.properties  # noqa: F401  (loads the Hypothesis profile: HYPOTHESIS_PROFILE)
from core.file_workers import FileReaders


def pytest_configure(config: pytest.Config) -> None:
    """Build Hypothesis' Unicode tables once, before the xdist workers start. They take ~5 s
    of CPU and are cached in ``.hypothesis/``; in a fresh clone each worker's first property
    test built them at once, three copies on two cores (18 s tests in CI)."""
    if hasattr(config, "workerinput"):  # a worker: the controller has built them
        return
    import warnings

    from hypothesis import strategies as st

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # .example() outside a test warns; here it is the point
        st.text().example()


@pytest.fixture
async def readers() -> AsyncIterator[FileReaders]:
    """Real worker processes that read files, ended after the test."""
    pool = FileReaders(max_parallel=2, parse_seconds=5, parse_memory_mb=256)
    yield pool
    await pool.aclose()


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
