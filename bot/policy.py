"""``policy_for(config, platform)``: a surface's policy, built once from the config.

The only reader of the policy's keys: ``agent.*`` (runs per person, lease, merge window,
approvers), ``context.*``, ``redis.per_thread``, and each platform's ``cooldown_seconds``,
``verbosity``, ``allowed_*``, ``admin_*``, ``allow_dms`` and ``telegram.admins``. A surface's
settings (``bot/serve_*.py``) map only what is truly its platform's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from adapters.context import ContextSettings
from adapters.policy import AccessPolicy, Policy, dm_rule
from bot.app import longest_run
from bot.config import Config, DiscordConfig, SlackConfig, TelegramConfig, WebConfig

PLATFORMS = ("discord", "slack", "telegram", "web")


def policy_for(config: Config, platform: str) -> Policy:
    """The policy of ``platform`` (one of ``PLATFORMS``) under ``config``."""
    sections: dict[str, DiscordConfig | SlackConfig | TelegramConfig | WebConfig] = {
        "discord": config.discord,
        "slack": config.slack,
        "telegram": config.telegram,
        "web": config.web,
    }
    if platform not in sections:
        raise ValueError(f"no policy for the platform {platform!r}; known: {', '.join(PLATFORMS)}")
    section, agent = sections[platform], config.agent
    admin_users, admin_roles = _admins(config, platform)
    return Policy(
        platform=platform,
        access=_access(config, platform),
        admin_users=admin_users,
        admin_roles=admin_roles,
        approvers=agent.approval.approvers,
        cooldown_seconds=section.cooldown_seconds,
        max_runs_per_user=agent.max_runs_per_user,
        lease=agent.lease_seconds,
        hold_at_most=longest_run(config),
        merge_window=agent.merge_window,
        verbosity=section.verbosity,
        per_thread=config.redis.per_thread,
        context=ContextSettings(
            messages=config.context.messages, max_chars=config.context.max_chars
        ),
    )


def _access(config: Config, platform: str) -> AccessPolicy:
    d, s = config.discord, config.slack
    if platform == "discord":
        return access_for(
            platform,
            spaces=d.allowed_guilds,
            places=d.allowed_channels,
            users=d.allowed_users,
            roles=d.allowed_roles,
            allow_dms=d.allow_dms,
        )
    if platform == "slack":
        return access_for(platform, places=s.allowed_channels, users=s.allowed_users)
    if platform == "telegram":
        return access_for(platform, places=config.telegram.allowed_chats)
    return AccessPolicy()  # the web chat: a session is its own place


def _admins(config: Config, platform: str) -> tuple[frozenset[str], frozenset[str]]:
    """``admin_users`` and ``admin_roles`` (``telegram.admins``; the web chat has none)."""
    if platform == "discord":
        return _texts(config.discord.admin_users), _texts(config.discord.admin_roles)
    if platform == "slack":
        return _texts(config.slack.admin_users), frozenset()
    if platform == "telegram":
        return _texts(config.telegram.admins), frozenset()
    return frozenset(), frozenset()


def access_for(
    platform: str,
    *,
    spaces: Iterable[int | str] = (),
    places: Iterable[int | str] = (),
    users: Iterable[int | str] = (),
    roles: Iterable[int | str] = (),
    allow_dms: bool = True,
) -> AccessPolicy:
    """Who may ask where on ``platform``, ids as text. A Telegram private chat is a chat of
    its own (``allowed_chats`` names it): with chats listed, one not listed is closed;
    elsewhere a DM is open, closed, or only for members when the bot is restricted to some
    places (``adapters.dispatch.access``)."""
    access = AccessPolicy(
        spaces=_texts(spaces), places=_texts(places), users=_texts(users), roles=_texts(roles)
    )
    if platform == "telegram":
        return replace(access, dms="closed" if access.places else "open")
    return replace(access, dms=dm_rule(restricted=access.restricted, allowed=allow_dms))


def _texts(ids: Iterable[int | str]) -> frozenset[str]:
    return frozenset(str(i) for i in ids)
