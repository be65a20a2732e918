"""Who may ask where: one rule for every surface, decided over facts only.

A surface translates its event into an ``Actor`` (id, roles, whether it is an admin here)
and a ``Where`` (a DM or not, its space, its places: thread, channel, category); the rule
reads them against ``Policy.access`` (``adapters.policy``; ids as text, an empty list allows
everyone). In order:

1. Someone the config lists as an admin (``admin_users``; Telegram's ``telegram.admins``)
   may ask anywhere: every list passes.
2. Where they ask:

   A DM is a ``dm``, or a Slack ``assistant`` thread (it lives in the person's DM with the
   app).

   - in a DM whose own place is listed (a Telegram private chat named in
     ``allowed_chats``): the place passes;
   - in any other DM, per ``access.dms``: ``closed``: refused (``DMS_CLOSED``); ``open``:
     on to the people; ``members`` (a bot restricted to some spaces, places or roles): a
     listed user goes on to the people; anyone else goes on only as a member of an allowed
     space or place, looked up now (``Members.of``, the surface's lookup: called only
     here, so a stranger costs no lookup when DMs are closed or open) and kept when its
     space is listed (if spaces are listed) and its place is listed (if places are listed
     and the membership names one); none: refused (``dms_for_members``). The roles those
     memberships hold count as the person's in 3;
   - elsewhere: the space must be listed (if spaces are), then one of the places (the
     thread, its channel, the channel's category; if places are); else refused
     (``not_here``).

3. The people, when users or roles are listed: an admin of any kind (the platform's own,
   such as a guild's administrator, ``admin_users``, an ``admin_roles`` role) passes,
   and so does a listed user or the holder of a listed role; anyone else is refused
   (``NOT_LISTED``). A platform admin or an admin role passes these lists only, never
   the space and place lists of 2.

The refusals are the shared words (``adapters.words``); a surface that can name places
(Slack's ``<#C1>``) passes a renderer (``names``) and the sentence names them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from adapters import words
from adapters.dispatch.intents import Actor, PlaceKind, Where
from adapters.policy import AccessPolicy, Policy


@dataclass(frozen=True, slots=True)
class Membership:
    """A person's membership of one of the bot's allowed spaces or places."""

    space: str | None = None
    """The guild or workspace, when the surface knows it."""
    place: str | None = None
    """The channel, when the surface looked up a channel's members (Slack); None: the whole
    space (Discord looks guilds up)."""
    roles: frozenset[str] = frozenset()
    """What they hold there, as text."""


class Members(Protocol):
    """A surface's lookup of a person's memberships of the allowed spaces and places, for a
    DM to a restricted bot (Discord: ``DmMemberships``; Slack: ``ChannelMembers``)."""

    async def of(self, user: str, access: AccessPolicy) -> Sequence[Membership]: ...


class NoMembers:
    """A surface that cannot look memberships up (Telegram, the web chat): nobody is found,
    so a DM to a restricted bot passes only when it is listed."""

    async def of(self, user: str, access: AccessPolicy) -> Sequence[Membership]:
        del user, access
        return ()


DM_KINDS: tuple[PlaceKind, ...] = ("dm", "assistant")
"""Where a person talks to the bot alone: a DM, and a Slack assistant thread (in their DM
with the app)."""

Names = Callable[[str], str]
"""Renders a place's id as its surface shows it (Slack: ``<#C1>``)."""


class Access:
    """The rule (module docstring) for one surface: its policy, its memberships lookup and,
    when it can name places, their renderer."""

    def __init__(
        self, policy: Policy, members: Members | None = None, *, names: Names | None = None
    ) -> None:
        self.policy = policy
        self.members: Members = members if members is not None else NoMembers()
        self._names = names

    async def refusal(self, actor: Actor, where: Where) -> str | None:
        """None when ``actor`` may ask at ``where``; otherwise the shared words why not."""
        policy, access = self.policy, self.policy.access
        if actor.id in policy.admin_users:
            return None
        roles, dm = actor.roles, where.kind in DM_KINDS
        if dm and not _listed(where.places, access.places):
            if access.dms == "closed":
                return words.DMS_CLOSED
            if access.dms == "members" and actor.id not in access.users:
                found = await self._memberships(actor.id)
                if not found:
                    return words.dms_for_members(self._shown(access.places))
                roles = roles.union(*(m.roles for m in found))
        elif not dm:
            if access.spaces and (where.space or "") not in access.spaces:
                return words.not_here(self._shown(access.places))
            if access.places and not _listed(where.places, access.places):
                return words.not_here(self._shown(access.places))
        if not access.users and not access.roles:
            return None
        admin = actor.admin or policy.admin(actor.id, roles=roles)
        if admin or actor.id in access.users or _listed(roles, access.roles):
            return None
        return words.NOT_LISTED

    async def _memberships(self, user: str) -> list[Membership]:
        """The person's memberships that count: in a listed space, of a listed place."""
        access = self.policy.access
        return [
            m
            for m in await self.members.of(user, access)
            if (not access.spaces or m.space in access.spaces)
            and (not access.places or m.place is None or m.place in access.places)
        ]

    def _shown(self, places: Iterable[str]) -> str:
        if self._names is None:
            return ""
        return words.place_list([self._names(place) for place in sorted(places)])


def _listed(ids: Iterable[str], listed: frozenset[str]) -> bool:
    return any(i in listed for i in ids)
