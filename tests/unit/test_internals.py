"""Each private API of a library that reactbot reaches into, checked by name.

A library release that moves one of these fails here, loudly and by name, before the place
that relies on it misbehaves quietly in production (a lost cancellation, a bucket scan back
on every request). docs/development.md lists each use: library, symbol, why, this test. The
libraries are capped at their next major version in pyproject.toml, and ``bot.versions``
warns at start-up when an installed one is outside its range.
"""

from __future__ import annotations

import inspect
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _parameters(function: object) -> list[str]:
    return list(inspect.signature(function).parameters)  # type: ignore[arg-type]


# redis-py: core/stores/redis/connection.py (_ReadsOnTime, _WaitsOnTime, _cluster_on_time, _describe)


def test_redis_connection_connect_is_a_private_coroutine_we_wrap() -> None:
    from redis.asyncio.connection import AbstractConnection

    assert inspect.iscoroutinefunction(AbstractConnection._connect), (
        "redis-py moved AbstractConnection._connect: _ReadsOnTime._connect no longer limits connects"
    )


def test_redis_read_response_keeps_its_signature() -> None:
    from redis.asyncio.connection import AbstractConnection

    assert _parameters(AbstractConnection.read_response) == [
        "self",
        "disable_decoding",
        "timeout",
        "disconnect_on_error",
        "push_request",
    ], "redis-py changed read_response: _ReadsOnTime.read_response passes these through"


def test_redis_write_is_limited_by_socket_timeout_through_wait_for() -> None:
    """_ReadsOnTime.send_packed_command sets ``socket_timeout`` to None for one write to turn
    redis-py's own ``wait_for`` off (CPython gh-86296 before 3.12) and limits it itself."""
    from redis.asyncio.connection import AbstractConnection

    assert _parameters(AbstractConnection.send_packed_command) == [
        "self",
        "command",
        "check_health",
    ]
    source = inspect.getsource(AbstractConnection.send_packed_command)
    assert "socket_timeout" in source, "redis-py's write no longer reads self.socket_timeout"
    for name in ("is_connected", "connect_check_health", "check_health"):
        assert hasattr(AbstractConnection, name), f"redis-py removed AbstractConnection.{name}"
    assert "check_health" in _parameters(AbstractConnection.connect_check_health)


def test_redis_cluster_nodes_manager_builds_nodes_with_a_connection_class() -> None:
    """_cluster_on_time sets the class on the node manager's kwargs and its startup nodes."""
    from redis.asyncio.cluster import RedisCluster

    cluster = RedisCluster(host="127.0.0.1", port=7000)  # connects on first use only
    manager = cluster.nodes_manager
    assert "connection_class" in manager.connection_kwargs
    nodes = list(manager.startup_nodes.values())
    assert nodes, "redis-py's NodesManager.startup_nodes is empty before connecting"
    assert all(hasattr(node, "connection_class") for node in nodes)


def test_redis_blocking_pool_takes_a_timeout_and_a_connection_class() -> None:
    import redis.asyncio as aioredis

    parameters = _parameters(aioredis.BlockingConnectionPool.__init__)
    assert {"timeout", "connection_class"} <= set(parameters)
    assert inspect.iscoroutinefunction(aioredis.BlockingConnectionPool.get_connection)
    pool = aioredis.BlockingConnectionPool()
    assert hasattr(pool, "connection_class"), "_WaitsOnTime sets the pool's connection_class"


def test_redis_sentinel_pool_names_its_service_and_sentinels() -> None:
    from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

    sentinel = Sentinel([("127.0.0.1", 26379)])
    pool = SentinelConnectionPool("mymaster", sentinel)
    assert pool.service_name == "mymaster"
    assert pool.sentinel_manager.sentinels, "_describe lists pool.sentinel_manager.sentinels"


def test_redis_pubsub_closes_with_aclose() -> None:
    from redis.asyncio.client import PubSub

    assert inspect.iscoroutinefunction(PubSub.aclose)


# discord.py: adapters/discord/client.py (endpoints, BucketSweep) and cog.py (roles)


def test_discord_rest_base_and_gateway_are_class_attributes() -> None:
    """``discord.api_base_url`` replaces ``Route.BASE`` and asks the gateway from it."""
    from discord.gateway import DiscordWebSocket
    from discord.http import HTTPClient, Route

    assert isinstance(Route.BASE, str) and Route.BASE.startswith("https://")
    assert str(DiscordWebSocket.DEFAULT_GATEWAY).startswith("wss://")
    assert inspect.iscoroutinefunction(HTTPClient.get_bot_gateway)


def test_discord_http_client_scans_buckets_where_the_sweep_replaces_it() -> None:
    from discord.http import HTTPClient, Ratelimit

    from adapters.discord.client import _BUCKET_FIELDS, BucketSweep

    assert callable(getattr(HTTPClient, "_try_clear_expired_ratelimits", None))
    assert set(Ratelimit.__slots__) >= _BUCKET_FIELDS

    class _Http:  # only the two attributes the sweep reads, as discord.py's HTTPClient has them
        def __init__(self) -> None:
            self._buckets: dict[str, object] = {}

        def _try_clear_expired_ratelimits(self) -> None:
            raise AssertionError("replaced")

    assert BucketSweep.install(_Http()), "BucketSweep would be left out on this discord.py"


async def test_discord_ui_items_keep_their_view_parent_and_children_where_release_clears() -> None:
    """surface.py's ``release_view`` unlinks a sent card through these attributes."""
    import discord

    text = discord.ui.TextDisplay[discord.ui.LayoutView]("x")
    container = discord.ui.Container[discord.ui.LayoutView](text)
    view = discord.ui.LayoutView()
    view.add_item(container)
    assert text._view is view and text._parent is container
    assert container._children == [text] and view._children == [container]


def test_discord_member_keeps_role_ids_in_roles_slot() -> None:
    """cog.py reads ``member._roles`` (ids, no cache look-up) for access checks."""
    from discord import Member

    assert "_roles" in Member.__slots__


# slack-bolt: adapters/slack/bot.py (_TokenFromEnvironment)


def test_slack_bolt_warns_with_the_message_we_filter() -> None:
    from slack_bolt.app import async_app
    from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped

    assert warning_client_prioritized_and_token_skipped()
    source = inspect.getsource(async_app)
    assert 'os.environ.get("SLACK_BOT_TOKEN")' in source, (
        "slack-bolt no longer reads SLACK_BOT_TOKEN itself: _TokenFromEnvironment may go"
    )


# aiohttp: adapters/slack/server.py and bot/ops.py read the bound port from the site's server


def test_aiohttp_site_keeps_its_server() -> None:
    from aiohttp import web

    assert "_server" in web.BaseSite.__slots__


# mcp: core/tools/mcp.py and core/tools/mcp_transport.py (a type only, under TYPE_CHECKING)


def test_mcp_transport_streams_type_exists() -> None:
    from mcp.client._transport import TransportStreams

    assert TransportStreams is not None


# python-telegram-bot: adapters/telegram/bot.py sets PTB_TIMEDELTA (RetryAfter as timedelta)


def test_telegram_reads_ptb_timedelta() -> None:
    import telegram._utils.datetime as ptb_datetime

    assert "PTB_TIMEDELTA" in inspect.getsource(ptb_datetime)


# The ranges: one truth in pyproject.toml, the same in bot.versions' start-up check.


def test_start_up_check_uses_pyprojects_ranges() -> None:
    from bot.versions import GUARDED

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    ranges = {d.split(">=")[0].split("<")[0].strip(): d for d in declared}
    for name, spec in GUARDED.items():
        assert ranges[name] == f"{name}{spec}", f"bot.versions' range of {name} is not pyproject's"
        assert ",<" in spec, f"{name} reaches into private API: cap it at its next major"


@pytest.mark.parametrize("name", ["redis", "discord.py", "slack-bolt", "openai"])
def test_installed_guarded_libraries_are_in_range(name: str) -> None:
    from bot.versions import GUARDED, outside_range

    assert outside_range(name, metadata.version(name), GUARDED[name]) is None


def test_outside_range_names_library_version_and_range() -> None:
    from bot.versions import outside_range

    assert outside_range("redis", "8.1.0", ">=8.1,<9") is None
    assert outside_range("redis", "8.99.3rc1", ">=8.1,<9") is None
    assert outside_range("redis", "9.0.0", ">=8.1,<9") == (
        "redis 9.0.0 is outside the range reactbot is tested with (>=8.1,<9)"
    )
    assert outside_range("redis", "8.0.2", ">=8.1,<9") is not None


def test_start_up_warns_once_per_library_outside_its_range(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from bot import versions

    real = metadata.version
    monkeypatch.setattr(
        metadata, "version", lambda name: "9.0.1" if name == "redis" else real(name)
    )
    versions.warn_outside_ranges()
    lines = [r.getMessage() for r in caplog.records if r.name == "bot.versions"]
    assert lines == [
        "redis 9.0.1 is outside the range reactbot is tested with (>=8.1,<9): "
        "parts of it reactbot relies on may have moved"
    ]
