"""``split(platform, **kw)``: a harness's keyword arguments, in the config's own names, as the
surface's settings and its ``Policy``, so a test says ``running(turns, cooldown_seconds=60)``
whatever object the value lives on. The access lists go through ``bot.policy.access_for``, the
one rule of who may ask where (DMs included)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from adapters.policy import Policy
from bot.policy import access_for

ACCESS = {
    "allowed_guilds": "spaces",
    "allowed_channels": "places",
    "allowed_chats": "places",
    "allowed_users": "users",
    "allowed_roles": "roles",
    "allow_dms": "allow_dms",
}
RENAMED = {"run_lease": "lease", "run_hold_at_most": "hold_at_most", "admins": "admin_users"}
POLICY = {f.name for f in fields(Policy)} - {"platform", "access"}


def split(platform: str, /, **kw: Any) -> tuple[dict[str, Any], Policy]:
    """The settings' keyword arguments (whatever is no policy field) and the policy."""
    settings: dict[str, Any] = {}
    access: dict[str, Any] = {}
    policy: dict[str, Any] = {}
    for name, value in kw.items():
        if name in ACCESS:
            access[ACCESS[name]] = value
        elif RENAMED.get(name, name) in POLICY:
            policy[RENAMED.get(name, name)] = _texts(value)
        else:
            settings[name] = value
    built = Policy(platform, access=access_for(platform, **access), **policy)
    return settings, built


def policy(platform: str, /, **kw: Any) -> Policy:
    """Only the policy: every keyword must be one of its fields (in the config's names)."""
    settings, built = split(platform, **kw)
    assert not settings, f"not policy fields: {sorted(settings)}"
    return built


def _texts(value: Any) -> Any:
    """Id lists as the policy keeps them (text); other values as given."""
    if isinstance(value, tuple | set | frozenset):
        return frozenset(str(v) for v in value)
    return value
