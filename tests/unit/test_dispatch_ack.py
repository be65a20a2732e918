"""``Dispatcher.dispatch(admitted=)`` and ``Dispatcher.retry`` over a real ``Answering`` on the
in-memory stores: the surface's ack comes once every check passed and before the run starts,
never for a refusal or a redelivery; an ack that fails gives the room back and starts
nothing; a Retry press is claimed once, takes its run once, and a refused one gives the run
back so a later press may try again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import cast

import pytest

from adapters import words
from adapters.channels import ChannelChoices
from adapters.dispatch.checks import Ticket
from adapters.dispatch.dispatcher import Dispatcher
from adapters.dispatch.handlers.ask import Answering, Reply
from adapters.dispatch.intents import Actor, Ask, Retry, Where
from adapters.dispatch.outcome import Done, Drop, Refusal
from adapters.policy import Policy
from core.agent import Agent
from core.budgets import TokenBudgets
from core.scripted import ScriptedModel
from core.stores import Stores
from core.tools import ToolRegistry
from core.trace import Trace

ANN = Actor("test", "5", "test:5", "ann")
BOB = Actor("test", "6", "test:6", "bob")
HERE = Where("test", "channel", "C1")


class Answered:
    """The ``answer`` a surface hands to ``dispatch``: here it notes the admitted ask and
    gives its room back at once, as an ended answer does."""

    def __init__(self) -> None:
        self.questions: list[str] = []

    async def __call__(self, ticket: Ticket[str], reply: Reply) -> None:
        del reply
        self.questions.append(ticket.ask.question)
        await ticket.give_back()


@pytest.fixture
async def dispatcher() -> AsyncIterator[Dispatcher[str]]:
    stores = Stores.in_memory()
    tools = ToolRegistry()
    answering: Answering[str] = Answering(
        Agent(ScriptedModel([]), tools, stores=stores),
        surface="test",
        policy=Policy("test", lease=25.0, cooldown_seconds=60.0),
        stores=stores,
        budgets=TokenBudgets(stores.usage),
        choices=ChannelChoices(stores.channel_settings, tools=tools),
        empty_question="Ask.",
        quote=str,
    )
    try:
        yield Dispatcher(answering, claims=stores.claims, traces=stores.traces)
    finally:
        await answering.settled()
        await answering.recovery.aclose()


def _ask(text: str, event: str, actor: Actor = ANN) -> Ask[str]:
    return Ask(event=event, actor=actor, where=HERE, question=text, gathers=False, who=actor.id)


def _no_reply(admitted: object) -> Reply:
    raise AssertionError("a refused or failed ask has no reply")


def _unused(admitted: object) -> Reply:
    return cast(Reply, None)  # ``Answered`` draws nothing


async def test_the_ack_comes_once_admitted_and_never_for_a_refusal_or_a_redelivery(
    dispatcher: Dispatcher[str],
) -> None:
    d, answered, acks = dispatcher, Answered(), []

    async def ack() -> None:
        acks.append(len(answered.questions))  # before the run starts

    async def send(ask: Ask[str]) -> object:
        return await d.dispatch(ask, _unused, answer=answered, admitted=ack)

    assert await send(_ask("first", "e1")) == Done()
    await d.answering.settled()
    assert acks == [0] and answered.questions == ["first"]
    assert await send(_ask("first", "e1")) == Drop("duplicate")
    refused = await send(_ask("second", "e2"))  # ann's cooldown
    assert isinstance(refused, Refusal) and refused.reason == "cooldown"
    assert refused.text.startswith(words.cooldown_message(60)[:30])
    assert acks == [0], "no ack for a redelivery or a refusal"


async def test_an_ack_that_fails_gives_the_room_back_and_starts_nothing(
    dispatcher: Dispatcher[str],
) -> None:
    d, answered = dispatcher, Answered()

    async def broken() -> None:
        raise ConnectionError("the platform went away")

    with pytest.raises(ConnectionError):
        await d.dispatch(_ask("q", "e1", BOB), _no_reply, answer=answered, admitted=broken)
    assert answered.questions == [] and d.answering.room.taken == 0
    assert await d.answering.slots.take(BOB.key, "probe", limit=1, lease=25.0), "slot given back"


async def test_retry_asks_once_and_a_refused_one_is_given_back_for_a_later_press(
    dispatcher: Dispatcher[str],
) -> None:
    d, answered = dispatcher, Answered()
    await d.traces.save(Trace(question="the meaning?", conversation="test:C1", id="r1"))
    assert await d.dispatch(_ask("busy now", "e0"), _unused, answer=answered) == Done()

    def press(event: str, actor: Actor) -> Retry:
        return Retry(event=event, actor=actor, where=HERE, run_id="r1", places=("test:C1",))

    async def retry(event: str, actor: Actor) -> object:
        return await d.retry(press(event, actor), lambda q: _ask(q, "", actor), _unused,
                             answer=answered)  # fmt: skip

    refused = await retry("p1", ANN)  # ann is cooling down: refused, the run given back
    assert isinstance(refused, Refusal) and refused.reason == "cooldown"
    assert await retry("p1", BOB) == Drop("duplicate"), "the same press, delivered again"
    assert await retry("p2", BOB) == Done()
    assert await retry("p3", BOB) == Refusal("retried", words.RETRY_DONE)
    await d.answering.settled()
    assert answered.questions == ["busy now", "the meaning?"]
