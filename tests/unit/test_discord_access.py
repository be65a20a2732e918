"""Who is an admin on Discord (``is_admin``: the guild's administrators, ``admin_users``,
``admin_roles``), and the cooldown notice. Who may ask where is the shared rule's
(``tests/unit/test_access_check.py``)."""

from __future__ import annotations

from adapters.discord.access import Asker, is_admin
from adapters.words import cooldown_message
from tests.surfaces.policy import policy


def test_admins() -> None:
    settings = policy("discord", admin_users=(3,), admin_roles=(8,))
    assert is_admin(settings, Asker(3, guild_id=10))
    assert is_admin(settings, Asker(1, frozenset({8}), guild_id=10))
    assert is_admin(settings, Asker(1, guild_id=10, guild_admin=True))
    assert not is_admin(settings, Asker(1, guild_id=10))


def test_cooldown_message_rounds_up() -> None:
    assert cooldown_message(2.1) == "⏳ One moment: you can ask again in 3 s."
