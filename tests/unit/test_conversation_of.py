"""``conversation_of``: one row per platform and kind of place (docs/plans/dispatcher.md §5.5).

The Discord bot-thread row is the issue's red-team finding: a message in a thread the bot
opened continued its channel's conversation while ``/reset`` there forgot the thread's; one
function now answers both."""

from __future__ import annotations

import pytest

from adapters.dispatch.conversation import burst_key, conversation_of, settings_place
from adapters.dispatch.intents import Actor, PlaceKind, Where
from adapters.policy import Policy

ROWS: list[tuple[str, PlaceKind, dict[str, str], str | None, str, str]] = [
    # platform, kind, where, root, per_thread on, per_thread off
    ("discord", "channel", {"channel": "10"}, None, "discord:10", "discord:10"),
    ("discord", "dm", {"channel": "77"}, None, "discord:77", "discord:77"),
    ("discord", "thread", {"channel": "10", "thread": "11"}, None, "discord:11", "discord:10"),
    (
        "discord",
        "private_thread",
        {"channel": "10", "thread": "12"},
        None,
        "discord:12",
        "discord:12",
    ),
    ("discord", "bot_thread", {"channel": "10", "thread": "13"}, None, "discord:10", "discord:10"),
    ("slack", "channel", {"space": "T1", "channel": "C1"}, None, "slack:T1:C1", "slack:T1:C1"),
    (
        "slack",
        "channel",
        {"space": "T1", "channel": "C1"},
        "111.1",
        "slack:T1:C1:111.1",
        "slack:T1:C1",
    ),
    (
        "slack",
        "thread",
        {"space": "T1", "channel": "C1", "thread": "100.5"},
        "222.2",
        "slack:T1:C1:100.5",
        "slack:T1:C1",
    ),
    ("slack", "dm", {"space": "T1", "channel": "D1"}, "333.3", "slack:T1:D1", "slack:T1:D1"),
    (
        "slack",
        "dm",
        {"space": "T1", "channel": "D1", "thread": "100.5"},
        None,
        "slack:T1:D1:100.5",
        "slack:T1:D1",
    ),
    (
        "slack",
        "assistant",
        {"space": "T1", "channel": "D1", "thread": "100.7"},
        None,
        "slack:T1:D1:100.7",
        "slack:T1:D1",
    ),
    ("telegram", "dm", {"channel": "5"}, None, "telegram:5", "telegram:5"),
    ("telegram", "channel", {"channel": "-100"}, None, "telegram:-100", "telegram:-100"),
    (
        "telegram",
        "topic",
        {"channel": "-100", "thread": "7"},
        None,
        "telegram:-100:7",
        "telegram:-100:7",
    ),
    ("web", "session", {"channel": "s1"}, None, "web:s1", "web:s1"),
]


@pytest.mark.parametrize(("platform", "kind", "at", "root", "threaded", "flat"), ROWS)
def test_each_place_has_one_conversation(
    platform: str, kind: PlaceKind, at: dict[str, str], root: str | None, threaded: str, flat: str
) -> None:
    where = Where(platform, kind, **at)
    on, off = Policy(platform), Policy(platform, per_thread=False)
    assert conversation_of(where, on, root=root) == threaded
    assert conversation_of(where, off, root=root) == flat


def test_every_platform_and_kind_has_a_row() -> None:
    covered = {(platform, kind) for platform, kind, *_ in ROWS}
    assert covered == {
        ("discord", "channel"),
        ("discord", "dm"),
        ("discord", "thread"),
        ("discord", "private_thread"),
        ("discord", "bot_thread"),
        ("slack", "channel"),
        ("slack", "thread"),
        ("slack", "dm"),
        ("slack", "assistant"),
        ("telegram", "dm"),
        ("telegram", "channel"),
        ("telegram", "topic"),
        ("web", "session"),
    }


@pytest.mark.parametrize(
    ("where", "place"),
    [
        (Where("discord", "bot_thread", "10", thread="13"), "discord:10"),
        (Where("discord", "thread", "10", thread="11"), "discord:10"),
        (Where("slack", "thread", "C1", space="T1", thread="1.1"), "slack:T1:C1"),
        (Where("telegram", "topic", "-100", thread="7"), "telegram:-100"),
        (Where("web", "session", "s1"), "web:s1"),
    ],
)
def test_settings_follow_the_channel(where: Where, place: str) -> None:
    assert settings_place(where) == place


def test_a_burst_is_one_person_in_one_conversation() -> None:
    policy = Policy("telegram")
    ann = Actor("telegram", "5", "telegram:5", "ann")
    bob = Actor("telegram", "6", "telegram:6", "bob")
    group, topic = (
        Where("telegram", "channel", "-100"),
        Where("telegram", "topic", "-100", thread="7"),
    )
    assert burst_key(ann, group, policy) != burst_key(bob, group, policy)
    assert burst_key(ann, group, policy) != burst_key(ann, topic, policy)
    assert burst_key(ann, group, policy) == burst_key(
        ann, Where("telegram", "channel", "-100"), policy
    )
