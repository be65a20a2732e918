"""Who may ask where (``adapters.dispatch.access``), one rule for every surface: every branch
of its docstring, as a table over the facts a surface translates (``Actor``, ``Where``) and
the policy the config builds (``bot.policy.access_for``, through ``tests.surfaces.policy``).
The surfaces' own tests show the same rule through their real SDKs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pytest

from adapters import words
from adapters.dispatch.access import Access, Membership
from adapters.dispatch.intents import Actor, Where
from adapters.policy import AccessPolicy, Policy
from tests.surfaces.policy import policy

GUILD, CHANNEL, CATEGORY, THREAD = "10", "20", "30", "40"

ANN = Actor("discord", "1", "discord:1", "ann")
LISTED = replace(ANN, id="5")
WITH_ROLE = replace(ANN, roles=frozenset({"7"}))
ADMIN_ROLE = replace(ANN, roles=frozenset({"8"}))
GUILD_ADMIN = replace(ANN, admin=True)  # the platform's own: a guild's administrator
CONFIGURED = replace(ANN, id="3", admin=True)  # admin_users

IN_CHANNEL = Where("discord", "channel", CHANNEL, space=GUILD, category=CATEGORY)
IN_THREAD = Where("discord", "thread", CHANNEL, space=GUILD, thread=THREAD)
OTHER_CHANNEL = Where("discord", "channel", "99", space=GUILD)
OTHER_GUILD = Where("discord", "channel", CHANNEL, space="11", category=CATEGORY)
DM = Where("discord", "dm", "555")

MEMBER = Membership(space=GUILD)
MEMBER_WITH_ROLE = Membership(space=GUILD, roles=frozenset({"7"}))
MEMBER_ADMIN_ROLE = Membership(space=GUILD, roles=frozenset({"8"}))
ELSEWHERE = Membership(space="99", roles=frozenset({"7"}))

NOT_HERE, DMS_FOR_MEMBERS = words.not_here(), words.dms_for_members()
ADMINS = {"admin_users": ("3",), "admin_roles": ("8",)}


@dataclass
class Looked:
    """The surface's lookup, recording each call: the rule must ask only when it needs to."""

    found: Sequence[Membership] = ()
    calls: list[str] = field(default_factory=list)

    async def of(self, user: str, access: AccessPolicy) -> Sequence[Membership]:
        assert access.dms == "members"
        self.calls.append(user)
        return self.found


# (case, policy keywords, actor, where, memberships found, refusal, looked up)
ROWS: list[
    tuple[str, dict[str, object], Actor, Where, tuple[Membership, ...], str | None, bool]
] = [
    ("no lists: everyone", {}, ANN, IN_CHANNEL, (), None, False),
    ("no lists: a DM is open", {}, ANN, DM, (), None, False),
    # spaces
    ("a listed guild", {"allowed_guilds": (GUILD,)}, ANN, IN_CHANNEL, (), None, False),
    ("another guild", {"allowed_guilds": (GUILD,)}, ANN, OTHER_GUILD, (), NOT_HERE, False),
    # places: the channel, its category, a thread (or its parent)
    ("a listed channel", {"allowed_channels": (CHANNEL,)}, ANN, IN_CHANNEL, (), None, False),
    ("a listed category", {"allowed_channels": (CATEGORY,)}, ANN, IN_CHANNEL, (), None, False),
    ("a listed thread", {"allowed_channels": (THREAD,)}, ANN, IN_THREAD, (), None, False),
    ("a thread's parent", {"allowed_channels": (CHANNEL,)}, ANN, IN_THREAD, (), None, False),
    ("another channel", {"allowed_channels": (CHANNEL,)}, ANN, OTHER_CHANNEL, (), NOT_HERE, False),
    (
        "a listed channel in another guild",
        {"allowed_guilds": (GUILD,), "allowed_channels": (CHANNEL,)},
        ANN,
        OTHER_GUILD,
        (),
        NOT_HERE,
        False,
    ),
    # people: users or roles
    ("a listed user", {"allowed_users": ("5",)}, LISTED, IN_CHANNEL, (), None, False),
    ("someone else", {"allowed_users": ("5",)}, ANN, IN_CHANNEL, (), words.NOT_LISTED, False),
    ("a listed role", {"allowed_roles": ("7",)}, WITH_ROLE, IN_CHANNEL, (), None, False),
    ("no listed role", {"allowed_roles": ("7",)}, ANN, IN_CHANNEL, (), words.NOT_LISTED, False),
    (
        "users or roles",
        {"allowed_users": ("5",), "allowed_roles": ("7",)},
        WITH_ROLE,
        IN_CHANNEL,
        (),
        None,
        False,
    ),
    # admins: the configured pass every list; the platform's and admin roles the people only
    (
        "admin_users pass the place lists",
        {"allowed_guilds": (GUILD,), "allowed_channels": (CHANNEL,), **ADMINS},
        CONFIGURED,
        OTHER_GUILD,
        (),
        None,
        False,
    ),
    (
        "admin_users pass the people lists",
        {"allowed_users": ("5",), **ADMINS},
        CONFIGURED,
        IN_CHANNEL,
        (),
        None,
        False,
    ),
    (
        "a guild's admin passes the people lists",
        {"allowed_users": ("5",)},
        GUILD_ADMIN,
        IN_CHANNEL,
        (),
        None,
        False,
    ),
    (
        "a guild's admin is held by the place lists",
        {"allowed_channels": (CHANNEL,)},
        GUILD_ADMIN,
        OTHER_CHANNEL,
        (),
        NOT_HERE,
        False,
    ),
    (
        "an admin role passes the people lists",
        {"allowed_roles": ("7",), **ADMINS},
        ADMIN_ROLE,
        IN_CHANNEL,
        (),
        None,
        False,
    ),
    (
        "an admin role is held by the space list",
        {"allowed_guilds": (GUILD,), **ADMINS},
        ADMIN_ROLE,
        OTHER_GUILD,
        (),
        NOT_HERE,
        False,
    ),
    # DMs: closed
    ("DMs closed", {"allow_dms": False}, ANN, DM, (), words.DMS_CLOSED, False),
    (
        "DMs closed, even listed",
        {"allow_dms": False, "allowed_users": ("5",)},
        LISTED,
        DM,
        (),
        words.DMS_CLOSED,
        False,
    ),
    (
        "DMs closed but for admin_users",
        {"allow_dms": False, **ADMINS},
        CONFIGURED,
        DM,
        (),
        None,
        False,
    ),
    # DMs: open (an unrestricted bot), the people lists still hold
    ("DMs open, users listed", {"allowed_users": ("5",)}, ANN, DM, (), words.NOT_LISTED, False),
    ("DMs open, a listed user", {"allowed_users": ("5",)}, LISTED, DM, (), None, False),
    # DMs: members (a restricted bot)
    ("a stranger", {"allowed_guilds": (GUILD,)}, ANN, DM, (), DMS_FOR_MEMBERS, True),
    ("a member", {"allowed_guilds": (GUILD,)}, ANN, DM, (MEMBER,), None, True),
    (
        "a member elsewhere",
        {"allowed_guilds": (GUILD,)},
        ANN,
        DM,
        (ELSEWHERE,),
        DMS_FOR_MEMBERS,
        True,
    ),
    (
        "a listed user, not looked up",
        {"allowed_guilds": (GUILD,), "allowed_users": ("5",)},
        LISTED,
        DM,
        (),
        None,
        False,
    ),
    (
        "a member, but users are listed",
        {"allowed_guilds": (GUILD,), "allowed_users": ("5",)},
        ANN,
        DM,
        (MEMBER,),
        words.NOT_LISTED,
        True,
    ),
    (
        "a member without the role",
        {"allowed_guilds": (GUILD,), "allowed_roles": ("7",)},
        ANN,
        DM,
        (MEMBER,),
        words.NOT_LISTED,
        True,
    ),
    (
        "a member with the role",
        {"allowed_guilds": (GUILD,), "allowed_roles": ("7",)},
        ANN,
        DM,
        (MEMBER_WITH_ROLE,),
        None,
        True,
    ),
    (
        "a member with an admin role",
        {"allowed_roles": ("7",), **ADMINS},
        ANN,
        DM,
        (MEMBER_ADMIN_ROLE,),
        None,
        True,
    ),
    (
        "admin_users are not looked up",
        {"allowed_guilds": (GUILD,), **ADMINS},
        CONFIGURED,
        DM,
        (),
        None,
        False,
    ),
    # a DM whose own place is listed (Telegram's private chat in allowed_chats)
    ("a listed DM", {"allowed_channels": ("555",)}, ANN, DM, (), None, False),
]


@pytest.mark.parametrize(
    ("keywords", "actor", "where", "found", "refusal", "looked"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
async def test_the_rule(
    keywords: dict[str, object],
    actor: Actor,
    where: Where,
    found: tuple[Membership, ...],
    refusal: str | None,
    looked: bool,
) -> None:
    members = Looked(found)
    access = Access(policy("discord", **keywords), members)
    assert await access.refusal(actor, where) == refusal
    assert members.calls == ([actor.id] if looked else [])


async def test_a_channel_membership_counts_for_a_listed_channel_only() -> None:
    """Slack looks channels up: a membership names its place, which must be a listed one."""
    slack = policy("slack", allowed_channels=("C1",))
    dm = Where("slack", "dm", "D1", space="T1")
    ada = Actor("slack", "U1", "slack:T1:U1", "ada")
    assert await Access(slack, Looked([Membership(place="C1")])).refusal(ada, dm) is None
    refused = await Access(slack, Looked([Membership(place="C2")])).refusal(ada, dm)
    assert refused == DMS_FOR_MEMBERS


async def test_a_slack_assistant_thread_is_a_dm() -> None:
    """It lives in the person's DM with the app: the DM rule, not the channel list."""
    slack = policy("slack", allowed_channels=("C1",))
    thread = Where("slack", "assistant", "D1", space="T1", thread="1.0")
    ada = Actor("slack", "U1", "slack:T1:U1", "ada")
    members = Looked([Membership(place="C1")])
    assert await Access(slack, members).refusal(ada, thread) is None
    assert members.calls == ["U1"]
    assert await Access(slack, Looked()).refusal(ada, thread) == DMS_FOR_MEMBERS


async def test_a_refusal_names_the_places_as_the_surface_renders_them() -> None:
    slack = policy("slack", allowed_channels=("C2", "C1"))
    access = Access(slack, Looked(), names=lambda channel: f"<#{channel}>")
    ada = Actor("slack", "U1", "slack:T1:U1", "ada")
    elsewhere = Where("slack", "channel", "C9", space="T1")
    assert await access.refusal(ada, elsewhere) == "I'm not enabled here; I answer in <#C1>, <#C2>."
    dm = Where("slack", "dm", "D1", space="T1")
    assert await access.refusal(ada, dm) == (
        "I answer direct messages only for members of <#C1>, <#C2>; ask me there."
    )


def test_a_long_list_of_places_is_cut() -> None:
    names = [f"<#C{n}>" for n in range(25)]
    shown = words.place_list(names)
    assert shown.endswith(", …") and shown.count("<#") == words.PLACES_SHOWN
    assert words.place_list(names[:2]) == "<#C0>, <#C1>"


async def test_telegram_allowed_chats_name_groups_and_private_chats_alike() -> None:
    """docs/telegram.md: ``allowed_chats`` lists the chats that may ask; a private chat's id
    is its person's. Unlisted, a group is not enabled and a private chat is closed."""
    listed = policy("telegram", allowed_chats=(-100, 5))
    access = Access(listed)
    ann = Actor("telegram", "5", "telegram:5", "ann")
    bob = Actor("telegram", "6", "telegram:6", "bob")
    group = Where("telegram", "channel", "-100")
    topic = Where("telegram", "topic", "-100", thread="3")
    assert await access.refusal(bob, group) is None
    assert await access.refusal(bob, topic) is None
    assert await access.refusal(ann, Where("telegram", "dm", "5")) is None
    assert await access.refusal(bob, Where("telegram", "dm", "6")) == words.DMS_CLOSED
    assert await access.refusal(ann, Where("telegram", "channel", "-200")) == NOT_HERE
    assert await Access(policy("telegram")).refusal(bob, Where("telegram", "dm", "6")) is None
    admins = Access(policy("telegram", allowed_chats=(-100,), admins=(6,)))
    assert await admins.refusal(bob, Where("telegram", "channel", "-200")) is None
    # A topic's id is a message id within its group: one equal to a listed private chat
    # (a user id, 5) lets no unlisted group in.
    colliding = Where("telegram", "topic", "-200", thread="5")
    assert await access.refusal(bob, colliding) == NOT_HERE


async def test_the_web_chat_has_no_lists() -> None:
    session = Where("web", "session", "s1")
    visitor = Actor("web", "s1", "web:s1", "visitor")
    assert await Access(Policy("web")).refusal(visitor, session) is None
