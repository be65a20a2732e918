"""Access control decisions (and the cooldown notice), over plain ids."""

from __future__ import annotations

from adapters.discord.access import Asker, is_admin, refusal
from adapters.words import cooldown_message
from tests.surfaces.policy import policy

GUILD, CHANNEL, CATEGORY, THREAD = 10, 20, 30, 40


def asker(**kw: object) -> Asker:
    base: dict[str, object] = {"user_id": 1, "guild_id": GUILD, "places": (CHANNEL, CATEGORY)}
    base.update(kw)
    return Asker(**base)  # type: ignore[arg-type]


def test_everyone_is_allowed_by_default() -> None:
    assert refusal(policy("discord"), asker()) is None


def test_guild_and_channel_lists_include_categories_and_thread_parents() -> None:
    settings = policy("discord", allowed_guilds=(GUILD,), allowed_channels=(CATEGORY,))
    assert refusal(settings, asker()) is None
    assert refusal(settings, asker(places=(THREAD, CHANNEL, CATEGORY))) is None
    assert refusal(settings, asker(places=(99,))) is not None
    assert refusal(settings, asker(guild_id=11)) is not None


def test_users_and_roles_lists() -> None:
    settings = policy("discord", allowed_users=(5,), allowed_roles=(7,))
    assert refusal(settings, asker(user_id=5)) is None
    assert refusal(settings, asker(role_ids=frozenset({7}))) is None
    assert "not on the list" in (refusal(settings, asker()) or "")
    assert refusal(settings, asker(guild_admin=True)) is None


def test_dms_follow_the_switch() -> None:
    assert refusal(policy("discord", allow_dms=True), asker(guild_id=None, places=())) is None
    assert refusal(policy("discord", allow_dms=False), asker(guild_id=None)) is not None


def test_admins() -> None:
    settings = policy("discord", admin_users=(3,), admin_roles=(8,))
    assert is_admin(settings, asker(user_id=3))
    assert is_admin(settings, asker(role_ids=frozenset({8})))
    assert not is_admin(settings, asker())


def test_cooldown_message_rounds_up() -> None:
    assert cooldown_message(2.1) == "⏳ One moment: you can ask again in 3 s."


def test_a_restricted_bot_answers_dms_only_for_listed_users_or_allowed_members() -> None:
    from adapters.discord.access import Membership

    dm = {"guild_id": None, "places": (555,)}
    for settings in (
        policy("discord", allowed_guilds=(GUILD,)),
        policy("discord", allowed_channels=(CHANNEL,)),
        policy("discord", allowed_roles=(7,)),
    ):
        stranger = refusal(settings, asker(**dm))
        assert stranger is not None and "members of the servers I serve" in stranger
    guilds = policy("discord", allowed_guilds=(GUILD,), allowed_users=(5,))
    assert refusal(guilds, asker(user_id=5, **dm)) is None
    member = Membership(GUILD, frozenset())
    assert refusal(guilds, asker(memberships=(member,), **dm)) is None
    elsewhere = Membership(99, frozenset({7}))
    assert refusal(guilds, asker(memberships=(elsewhere,), **dm)) is not None
    roles = policy("discord", allowed_guilds=(GUILD,), allowed_roles=(7,))
    assert refusal(roles, asker(memberships=(member,), **dm)) is not None
    with_role = Membership(GUILD, frozenset({7}))
    assert refusal(roles, asker(memberships=(with_role,), **dm)) is None
    assert refusal(policy("discord"), asker(**dm)) is None  # unrestricted: DMs are open
