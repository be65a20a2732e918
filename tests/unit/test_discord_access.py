"""Access control decisions (and the cooldown notice), over plain ids."""

from __future__ import annotations

from adapters.discord.access import Asker, cooldown_message, is_admin, refusal
from adapters.discord.settings import DiscordSettings

GUILD, CHANNEL, CATEGORY, THREAD = 10, 20, 30, 40


def asker(**kw: object) -> Asker:
    base: dict[str, object] = {"user_id": 1, "guild_id": GUILD, "places": (CHANNEL, CATEGORY)}
    base.update(kw)
    return Asker(**base)  # type: ignore[arg-type]


def test_everyone_is_allowed_by_default() -> None:
    assert refusal(DiscordSettings(), asker()) is None


def test_guild_and_channel_lists_include_categories_and_thread_parents() -> None:
    settings = DiscordSettings(allowed_guilds=(GUILD,), allowed_channels=(CATEGORY,))
    assert refusal(settings, asker()) is None
    assert refusal(settings, asker(places=(THREAD, CHANNEL, CATEGORY))) is None
    assert refusal(settings, asker(places=(99,))) is not None
    assert refusal(settings, asker(guild_id=11)) is not None


def test_users_and_roles_lists() -> None:
    settings = DiscordSettings(allowed_users=(5,), allowed_roles=(7,))
    assert refusal(settings, asker(user_id=5)) is None
    assert refusal(settings, asker(role_ids=frozenset({7}))) is None
    assert "not on the list" in (refusal(settings, asker()) or "")
    assert refusal(settings, asker(guild_admin=True)) is None


def test_dms_follow_the_switch() -> None:
    assert refusal(DiscordSettings(allow_dms=True), asker(guild_id=None, places=())) is None
    assert refusal(DiscordSettings(allow_dms=False), asker(guild_id=None)) is not None


def test_admins() -> None:
    settings = DiscordSettings(admin_users=(3,), admin_roles=(8,))
    assert is_admin(settings, asker(user_id=3))
    assert is_admin(settings, asker(role_ids=frozenset({8})))
    assert not is_admin(settings, asker())


def test_cooldown_message_rounds_up() -> None:
    assert cooldown_message(2.1) == "⏳ One moment: you can ask again in 3 s."
