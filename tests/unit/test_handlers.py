"""The commands that start no run, decided once (``adapters.dispatch.commands``): each
check the intent declares, then its handler, over in-memory stores. The surfaces' tests and
the conformance table show the same through the real SDKs; these pin the rules."""

from __future__ import annotations

from dataclasses import replace

import pytest

from adapters import words
from adapters.channels import ChannelChoices
from adapters.dispatch.access import Access
from adapters.dispatch.commands import Commands, shared
from adapters.dispatch.handlers.services import Services
from adapters.dispatch.intents import (
    Actor,
    PlaceKind,
    Reset,
    Settings,
    SetVerbosity,
    ShowSettings,
    ShowTrace,
    Usage,
    Vote,
    Where,
)
from adapters.dispatch.outcome import Drop, Refusal, Said
from adapters.policy import AccessPolicy, Policy
from core.budgets import InMemoryUsageCounters, TokenBudgets
from core.stores import Stores
from core.trace import Trace

ANN = Actor("slack", "U1", "slack:T1:U1", "ann")
ADMIN = Actor("slack", "U9", "slack:T1:U9", "mod", admin=True)
CHANNEL = Where("slack", "channel", "C1", space="T1")
DM = Where("slack", "dm", "D1", space="T1")
POLICY = Policy("slack", verbosity="compact")


def commands(*, policy: Policy = POLICY) -> tuple[Commands, Stores]:
    stores = Stores.in_memory()
    services = Services(
        policy,
        stores,
        TokenBudgets(InMemoryUsageCounters(), per_user=1000),
        ChannelChoices(stores.channel_settings),
    )
    return Commands(services, access=Access(policy)), stores


async def said(handlers: Commands, intent: object) -> Refusal | Drop | Said:
    return await handlers.dispatch(intent)  # type: ignore[arg-type]


async def test_each_event_once_then_access_then_the_handler() -> None:
    handlers, _ = commands()
    usage = Usage(event="e1", actor=ANN, where=CHANNEL)
    assert isinstance(await said(handlers, usage), Said)
    assert await said(handlers, usage) == Drop("duplicate")
    elsewhere = AccessPolicy(places=frozenset({"C2"}), dms="members")
    closed, _ = commands(policy=replace(POLICY, access=elsewhere))
    assert await said(closed, Usage(event="e2", actor=ANN, where=CHANNEL)) == Refusal(
        "access", words.not_here()
    )


async def test_reset_in_a_shared_place_needs_an_admin_and_forgets_the_answer_threads() -> None:
    handlers, stores = commands()
    for conversation in ("slack:T1:C1", "slack:T1:C1:111.1", "slack:T1:C1:222.2"):
        await stores.history.append(conversation, {"role": "user", "content": "hi"})

    async def threads() -> list[str]:
        return ["222.2", "111.1"]

    refused = await said(handlers, Reset(event="r1", actor=ANN, where=CHANNEL, threads=threads))
    assert refused == Refusal("who", words.RESET_ADMINS)
    assert await stores.history.load("slack:T1:C1:111.1")
    done = await said(handlers, Reset(event="r2", actor=ADMIN, where=CHANNEL, threads=threads))
    assert done == Said(words.RESET_DONE)
    for conversation in ("slack:T1:C1", "slack:T1:C1:111.1", "slack:T1:C1:222.2"):
        assert await stores.history.load(conversation) == []


async def test_anyone_resets_their_own_conversation() -> None:
    handlers, stores = commands()
    await stores.history.append("slack:T1:D1", {"role": "user", "content": "hi"})
    assert await said(handlers, Reset(event="r", actor=ANN, where=DM)) == Said(words.RESET_DONE)
    assert await stores.history.load("slack:T1:D1") == []


@pytest.mark.parametrize(
    ("kind", "per_thread", "is_shared"),
    [
        ("channel", True, True),
        ("bot_thread", True, True),  # it continues its channel's conversation
        ("thread", True, False),  # its own conversation
        ("thread", False, True),  # the channel's, with redis.per_thread off
        ("topic", True, True),  # the group's: its admins manage it (as before on Telegram)
        ("dm", True, False),
        ("private_thread", True, False),
        ("session", True, False),
        ("assistant", True, False),
    ],
)
def test_which_places_are_shared(kind: PlaceKind, per_thread: bool, is_shared: bool) -> None:
    where = Where("discord", kind, "1", thread="2")
    assert shared(where, Policy("discord", per_thread=per_thread)) is is_shared


async def test_the_last_trace_is_the_newest_among_the_places_threads() -> None:
    handlers, stores = commands()
    assert await said(handlers, ShowTrace(event="t0", actor=ANN, where=CHANNEL)) == Said(
        words.NO_TRACE
    )
    old = Trace("old one", conversation="slack:T1:C1:111.1", started_at=1.0)
    new = Trace("new\none", conversation="slack:T1:C1:222.2", started_at=2.0)
    for trace in (new, old):
        await stores.traces.save(trace)

    async def threads() -> list[str]:
        return ["111.1", "222.2"]

    shown = await said(handlers, ShowTrace(event="t1", actor=ANN, where=CHANNEL, threads=threads))
    assert isinstance(shown, Said) and shown.trace is not None and shown.trace.id == new.id
    assert shown.text == words.trace_shown("new one")  # one line


async def test_settings_are_read_by_anyone_and_changed_by_admins_or_in_ones_own_session() -> None:
    handlers, stores = commands()
    shown = await said(handlers, Settings(event="s1", actor=ANN, where=CHANNEL))
    assert isinstance(shown, Said) and "compact (the default)" in shown.text
    change = SetVerbosity("answer")
    refused = await said(handlers, Settings(event="s2", actor=ANN, where=CHANNEL, change=change))
    assert refused == Refusal("who", words.ONLY_ADMINS)
    assert await stores.channel_settings.get("slack:T1:C1") == {}
    done = await said(handlers, Settings(event="s3", actor=ADMIN, where=CHANNEL, change=change))
    assert done == Said(words.now_sees("**answer**"))
    assert await stores.channel_settings.get("slack:T1:C1") == {"verbosity": "answer"}
    session = Where("web", "session", "abc")
    web = Actor("web", "abc", "web:abc", "you")
    back = await said(handlers, Settings(event="s4", actor=web, where=session,
                                         change=SetVerbosity(None)))  # fmt: skip
    assert back == Said(words.now_sees("**compact (the default)**"))
    assert Settings(event="x", actor=ANN, where=CHANNEL, change=ShowSettings()).checks == (
        "claim",
        "access",
    )


async def test_a_vote_counts_once_per_person_and_only_from_its_runs_place() -> None:
    handlers, stores = commands()
    run = Trace("q", conversation="slack:T1:C1:111.1")
    await stores.traces.save(run)
    at_answer = Where("slack", "thread", "C1", space="T1", thread="111.1")
    elsewhere = Where("slack", "channel", "C2", space="T1", thread="333.3")
    up = Vote(event="v1", actor=ANN, where=at_answer, run_id=run.id, value="up")
    down = Vote(event="v2", actor=ANN, where=at_answer, run_id=run.id, value="down")
    forged = Vote(event="v3", actor=ADMIN, where=elsewhere, run_id=run.id, value="up")
    gone = Vote(event="v4", actor=ANN, where=at_answer, run_id="nope", value="up")
    assert await said(handlers, up) == Said(words.vote_kept("up"))
    assert await said(handlers, down) == Said(words.vote_kept("down"))
    assert await said(handlers, forged) == Said(words.VOTE_LOST)
    assert await said(handlers, gone) == Said(words.VOTE_LOST)
    kept = await stores.traces.get(run.id)
    assert kept is not None and [(v.by, v.value) for v in kept.votes] == [("U1", "down")]


async def test_usage_tells_an_admin_they_are_not_limited() -> None:
    handlers, _ = commands()
    plain = await said(handlers, Usage(event="u1", actor=ANN, where=CHANNEL))
    admin = await said(handlers, Usage(event="u2", actor=ADMIN, where=CHANNEL))
    assert isinstance(plain, Said) and plain.text.startswith("You have used")
    assert "not limited" not in plain.text
    assert isinstance(admin, Said) and admin.text.endswith("(Admins are not limited.)")
