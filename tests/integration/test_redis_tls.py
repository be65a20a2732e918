"""TLS (``rediss://``): a real ``redis-server`` that speaks only TLS (``--port 0``) and asks for
a client certificate, with a CA, server and client certificate made by the test. The stores
work with ``redis.tls_ca_file``/``tls_cert_file``/``tls_key_file``; a client that does not
trust the server's CA, or has no certificate, is refused and says why without the password."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import run_cli
from core.errors import StoreUnavailable
from core.stores.redis import RedisTarget, connect, parse_host_port
from tests.fakes.openai_server import FakeOpenAI
from tests.integration.redis_topologies import (
    SERVICE,
    Certificates,
    Cluster,
    Process,
    cluster,
    command,
    make_certificates,
    sentinel_set,
    tls_args,
    tls_pings,
    tls_server,
)


@pytest.fixture
def certs(tmp_path: Path) -> Certificates:
    return make_certificates(tmp_path)


@pytest.fixture
def server(tmp_path: Path, certs: Certificates) -> Iterator[Process]:
    with tls_server(tmp_path, certs) as started:
        yield started


def tls_target(port: int, certs: Certificates, **changes: object) -> RedisTarget:
    settings: dict[str, object] = {
        "url": f"rediss://:s3cret-pw@127.0.0.1:{port}/0",
        "tls_ca_file": str(certs.ca),
        "tls_cert_file": str(certs.client_cert),
        "tls_key_file": str(certs.client_key),
    }
    return RedisTarget(**{**settings, **changes})  # type: ignore[arg-type]


async def test_the_stores_work_over_tls_with_a_client_certificate(
    server: Process, certs: Certificates
) -> None:
    stores = connect(tls_target(server.port, certs), prefix=f"t{uuid.uuid4().hex[:8]}:")
    try:
        await stores.ping()
        await stores.history.append("c1", {"role": "user", "content": "over TLS"})
        assert await stores.history.load("c1") == [{"role": "user", "content": "over TLS"}]
        assert await stores.claims.claim("e1") is True
    finally:
        await stores.aclose()


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"tls_ca_file": None}, "certificate verify failed"),  # the system's CAs: not ours
        ({"tls_cert_file": None, "tls_key_file": None}, ""),  # no client certificate
        ({"url": None}, ""),  # plain TCP to a TLS port
    ],
    ids=["untrusted-server", "no-client-certificate", "plain-text"],
)
async def test_a_client_the_server_or_it_does_not_trust_is_refused(
    server: Process, certs: Certificates, changes: dict[str, object], said: str
) -> None:
    if "url" in changes:
        changes = {"url": f"redis://:s3cret-pw@127.0.0.1:{server.port}/0"}
        target = RedisTarget(url=str(changes["url"]))
    else:
        target = tls_target(server.port, certs, **changes)
    stores = connect(target, prefix="t:")
    try:
        with pytest.raises(StoreUnavailable) as raised:
            await stores.ping()
    finally:
        await stores.aclose()
    assert "s3cret-pw" not in str(raised.value)
    assert f"127.0.0.1:{server.port}" in str(raised.value)
    assert said in str(raised.value)


async def test_the_app_uses_the_tls_settings_of_the_config(
    server: Process, certs: Certificates, tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "redis:\n"
        f"  prefix: 't{uuid.uuid4().hex[:8]}:'\n"
        f"  tls_ca_file: {certs.ca.name}\n"  # relative: to the config file's directory
        f"  tls_cert_file: {certs.client_cert}\n"
        f"  tls_key_file: {certs.client_key}\n"
    )
    async with FakeOpenAI(model="m") as fake:
        fake.reply("Thought: greet\nAction: finish[Hello Ada.]")
        fake.reply("Thought: I remember\nAction: finish[You are Ada.]")
        env = {
            "REDIS_URL": f"rediss://127.0.0.1:{server.port}/0",
            "REACTBOT_MODEL": "m",
            "OPENAI_BASE_URL": fake.base_url,
        }
        for question in ("I am Ada", "Who am I?"):
            out = io.StringIO()
            argv = ["--config", str(config), "ask", "--conversation", "c1", question]
            assert await run_cli(argv, env=env, stdout=out) == 0, out.getvalue()
        assert "memory unavailable" not in out.getvalue()
        assert {"role": "assistant", "content": "Hello Ada."} in fake.requests[1]["messages"]


@pytest.mark.slow  # a cluster takes 1-2 s to form
async def test_a_cluster_over_tls(tmp_path: Path, certs: Certificates) -> None:
    """Cluster nodes that speak TLS on their client and bus ports (``tls-cluster yes``)."""
    extra = [*tls_args(certs), "--tls-cluster", "yes", "--tls-replication", "yes"]
    with cluster(tmp_path, extra=extra, tls=certs) as nodes:
        await _cluster_round_trip(nodes, certs)


async def _cluster_round_trip(nodes: Cluster, certs: Certificates) -> None:
    url = nodes.url.replace("redis://", "rediss://")
    stores = connect(
        RedisTarget(
            url=url,
            cluster=True,
            tls_ca_file=str(certs.ca),
            tls_cert_file=str(certs.client_cert),
            tls_key_file=str(certs.client_key),
        ),
        prefix=f"t{uuid.uuid4().hex[:8]}:",
    )
    try:
        for i in range(6):  # conversations on several nodes
            await stores.history.append(f"c{i}", {"role": "user", "content": f"m{i}"})
        loaded = [await stores.history.load(f"c{i}") for i in range(6)]
        assert [m[0]["content"] for m in loaded] == [f"m{i}" for i in range(6)]
    finally:
        await stores.aclose()
    assert all(tls_pings(node.port, certs) for node in nodes.nodes)


@pytest.mark.slow  # the sentinels take 2 s to meet
async def test_a_sentinel_managed_primary_over_tls(tmp_path: Path, certs: Certificates) -> None:
    """Sentinels, primary and replica that speak TLS only: the stores find the primary through
    the sentinels over TLS and write to it over TLS, with the same CA and certificate."""
    with sentinel_set(tmp_path, tls=certs) as deployment:
        stores = connect(
            RedisTarget(
                url="rediss:///0",
                sentinels=tuple(parse_host_port(a) for a in deployment.addresses),
                sentinel_service=SERVICE,
                tls_ca_file=str(certs.ca),
                tls_cert_file=str(certs.client_cert),
                tls_key_file=str(certs.client_key),
            ),
            prefix=f"t{uuid.uuid4().hex[:8]}:",
        )
        try:
            await stores.history.append("c1", {"role": "user", "content": "over TLS"})
            assert await stores.claims.claim("e1") is True  # WAITs for the TLS replica
            assert await stores.history.load("c1") == [{"role": "user", "content": "over TLS"}]
        finally:
            await stores.aclose()
        key = stores.history.key("c1")
        assert command(deployment.primary.port, "EXISTS", key, certs=certs) == ":1\r\n"
