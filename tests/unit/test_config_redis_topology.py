"""``redis.sentinels``, ``redis.sentinel_service``, ``redis.cluster`` and the TLS files: what is
accepted, what is refused (and the message that says why), and how they reach the stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.app import redis_target
from bot.cli import redis_address
from bot.config import ConfigError, load_config


def load(tmp_path: Path, text: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return load_config(path, env or {})


def error_for(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text, env)
    return str(info.value)


def test_sentinels_name_the_primary_and_reach_the_stores(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        "redis:\n  sentinels: ['10.0.0.1:26379', '[::1]:26380']\n  sentinel_service: cache\n",
        {"REDIS_URL": "rediss://:pw@ignored:1/3"},
    )
    assert config.redis.configured
    target = redis_target(config.redis)
    assert target.sentinels == (("10.0.0.1", 26379), ("::1", 26380))
    assert target.sentinel_service == "cache" and target.tls
    assert "pw" not in redis_address(config.redis)
    assert "'cache'" in redis_address(config.redis) and "10.0.0.1:26379" in redis_address(
        config.redis
    )


def test_sentinels_from_the_environment_as_json(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        "",
        {
            "REACTBOT_REDIS__SENTINELS": '["a:26379", "b:26379"]',
            "REACTBOT_REDIS__SENTINEL_SERVICE": "mymaster",
        },
    )
    assert config.redis.sentinels == ("a:26379", "b:26379")
    assert config.redis.configured and config.redis.url is None


def test_a_cluster_and_tls_files_relative_to_the_config(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        "redis:\n  url: rediss://node1:6379/0\n  cluster: true\n  tls_ca_file: certs/ca.pem\n",
    )
    target = redis_target(config.redis)
    assert target.cluster and target.tls_ca_file == str(tmp_path / "certs" / "ca.pem")
    assert target.tls_kwargs()["ssl_ca_certs"] == str(tmp_path / "certs" / "ca.pem")
    assert redis_address(config.redis) == "the cluster of node1:6379"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("redis: {sentinels: ['a:1']}", "redis.sentinels needs redis.sentinel_service"),
        ("redis: {sentinel_service: m}", "redis.sentinel_service needs redis.sentinels"),
        ("redis: {sentinels: ['a']}", "each sentinel is host:port"),
        ("redis: {sentinels: ['a:99999']}", "each sentinel is host:port"),
        ("redis: {cluster: true}", "redis.cluster needs redis.url"),
        (
            "redis: {url: 'redis://a', cluster: true, sentinels: ['a:1'], sentinel_service: m}",
            "redis.sentinels and redis.cluster exclude each other",
        ),
        ("redis: {url: 'unix:///r.sock', cluster: true}", "need a redis:// or rediss:// url"),
        ("redis: {url: 'redis://a', cluster: true, prefix: '{x}:'}", "redis.prefix may not hold"),
        ("redis: {url: 'redis://a', tls_ca_file: ca.pem}", "redis.tls_* settings need a rediss://"),
        ("redis: {url: 'rediss://a', tls_key_file: k.pem}", "tls_key_file needs redis.tls_cert"),
    ],
)
def test_inconsistent_settings_are_refused_with_the_fix(
    tmp_path: Path, text: str, expected: str
) -> None:
    message = error_for(tmp_path, text + "\n")
    assert message.startswith("config error: ") and expected in message


def test_one_server_needs_none_of_it(tmp_path: Path) -> None:
    config = load(tmp_path, "redis:\n  url: redis://r:6379/0\n")
    target = redis_target(config.redis)
    assert not target.cluster and not target.sentinels and target.tls_kwargs() == {}
    assert not load(tmp_path, "").redis.configured
