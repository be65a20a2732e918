"""The ``backend`` fixture: each conformance test runs once per backend (``conformance``)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from core.stores.redis.connection import RedisTarget
from tests.integration.redis_topologies import Cluster, cluster
from tests.stores.conformance import BACKENDS, Backend, open_backend


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster(tmp_path_factory.mktemp("cluster")) as started:
        yield started


@pytest.fixture(
    params=[
        pytest.param(name, marks=[pytest.mark.slow] if name == "redis-cluster" else [])
        for name in BACKENDS
    ]
)
async def backend(
    request: pytest.FixtureRequest, redis_url: str, redis_prefix: str
) -> AsyncIterator[Backend]:
    where: str | RedisTarget = redis_url
    prefix = redis_prefix
    if request.param == "redis-cluster":  # a throwaway cluster: its keys go with it
        started: Cluster = request.getfixturevalue("redis_cluster")
        where, prefix = RedisTarget(url=started.url, cluster=True), f"t{uuid.uuid4().hex[:8]}:"
    async with open_backend(request.param, redis=where, prefix=prefix) as opened:
        yield opened
