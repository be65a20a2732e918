"""``policy_for(config, platform)``: one row per platform and policy field, each read from the
config key that the docs name for it, with every key set to a value no default has."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.context import ContextSettings
from adapters.policy import AccessPolicy, Policy
from bot.app import longest_run
from bot.config import Config
from bot.policy import PLATFORMS, policy_for

CONFIG = Config.model_validate(
    {
        "agent": {
            "max_runs_per_user": 7,
            "lease_seconds": 11.0,
            "merge_window": 0.75,
            "deadline": 100.0,
            "approval": {"approvers": "admins"},
        },
        "context": {"messages": 3, "max_chars": 900},
        "redis": {"per_thread": False},
        "discord": {
            "allowed_guilds": [1],
            "allowed_channels": [2],
            "allowed_users": [3],
            "allowed_roles": [4],
            "admin_users": [5],
            "admin_roles": [6],
            "allow_dms": False,
            "cooldown_seconds": 1.5,
            "verbosity": "compact",
        },
        "slack": {
            "allowed_channels": ["C1"],
            "allowed_users": ["U1"],
            "admin_users": ["UADMIN"],
            "cooldown_seconds": 2.5,
            "verbosity": "answer",
        },
        "telegram": {
            "allowed_chats": [-100],
            "admins": [42],
            "cooldown_seconds": 3.5,
            "verbosity": "compact",
        },
        "web": {"cooldown_seconds": 4.5, "verbosity": "answer"},
    }
)

SHARED: list[tuple[str, Any]] = [
    ("approvers", "admins"),
    ("max_runs_per_user", 7),
    ("lease", 11.0),
    ("hold_at_most", longest_run(CONFIG)),
    ("merge_window", 0.75),
    ("per_thread", False),
    ("context", ContextSettings(messages=3, max_chars=900)),
]
"""The same on every platform: ``agent.*``, ``redis.per_thread``, ``context.*``."""

OWN: list[tuple[str, str, Any]] = [
    ("discord", "cooldown_seconds", 1.5),
    ("discord", "verbosity", "compact"),
    ("discord", "admin_users", frozenset({"5"})),
    ("discord", "admin_roles", frozenset({"6"})),
    (
        "discord",
        "access",
        AccessPolicy(
            spaces=frozenset({"1"}),
            places=frozenset({"2"}),
            users=frozenset({"3"}),
            roles=frozenset({"4"}),
            dms="closed",
        ),
    ),
    ("slack", "cooldown_seconds", 2.5),
    ("slack", "verbosity", "answer"),
    ("slack", "admin_users", frozenset({"UADMIN"})),
    ("slack", "admin_roles", frozenset()),
    (
        "slack",
        "access",
        AccessPolicy(places=frozenset({"C1"}), users=frozenset({"U1"}), dms="members"),
    ),
    ("telegram", "cooldown_seconds", 3.5),
    ("telegram", "verbosity", "compact"),
    ("telegram", "admin_users", frozenset({"42"})),
    ("telegram", "admin_roles", frozenset()),
    # a private chat is a DM allowed_chats may name: unlisted, closed
    ("telegram", "access", AccessPolicy(places=frozenset({"-100"}), dms="closed")),
    ("web", "cooldown_seconds", 4.5),
    ("web", "verbosity", "answer"),
    ("web", "admin_users", frozenset()),
    ("web", "admin_roles", frozenset()),
    ("web", "access", AccessPolicy()),
]


@pytest.mark.parametrize(
    ("platform", "name", "expected"),
    [(p, name, value) for p in PLATFORMS for name, value in SHARED] + OWN,
)
def test_each_field_comes_from_its_config_key(platform: str, name: str, expected: Any) -> None:
    policy = policy_for(CONFIG, platform)
    assert policy.platform == platform
    assert getattr(policy, name) == expected


def test_every_field_has_a_row_on_every_platform() -> None:
    named = {name for name, _ in SHARED} | {name for _, name, _ in OWN} | {"platform"}
    assert named == set(Policy.__dataclass_fields__)
    for platform in PLATFORMS:
        assert {name for p, name, _ in OWN if p == platform} == {
            "cooldown_seconds",
            "verbosity",
            "admin_users",
            "admin_roles",
            "access",
        }


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_lease_is_agent_lease_seconds_everywhere(platform: str) -> None:
    """Telegram once took ``deadline + 60`` (240 s before an orphan was finished)."""
    config = Config()
    assert policy_for(config, platform).lease == config.agent.lease_seconds == 25.0


@pytest.mark.parametrize(
    ("discord", "dms"),
    [
        ({}, "open"),
        ({"allow_dms": False}, "closed"),
        ({"allowed_guilds": [1]}, "members"),
        ({"allowed_channels": [2]}, "members"),
        ({"allowed_roles": [4]}, "members"),
        ({"allowed_users": [3]}, "open"),  # a user list applies in DMs as it is
    ],
)
def test_discord_dms_follow_the_switch_and_the_restriction(
    discord: dict[str, Any], dms: str
) -> None:
    config = Config.model_validate({"discord": discord})
    assert policy_for(config, "discord").access.dms == dms


def test_an_unknown_platform_is_named() -> None:
    with pytest.raises(ValueError, match="'irc'"):
        policy_for(Config(), "irc")


def test_who_is_an_admin_is_decided_once() -> None:
    policy = Policy("discord", admin_users=frozenset({"1"}), admin_roles=frozenset({"9"}))
    assert policy.admin("1") and not policy.admin("2")
    assert policy.admin("2", roles=("8", "9")) and not policy.admin("2", roles=("8",))
    assert policy.admin("2", platform=True), "the platform's own administrators"
