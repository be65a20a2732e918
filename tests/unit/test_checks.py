"""The dispatcher's own checks, each alone over the store protocol it needs: ``Claim`` drops a
redelivery without a word, ``Burst`` gathers one person's messages in one conversation and
lets a slash command (which cannot wait) through at once."""

from __future__ import annotations

import asyncio

from adapters import words
from adapters.dispatch.checks import Admission, Burst, Claim, RetryOnce
from adapters.dispatch.handlers.retry import ask_again
from adapters.dispatch.intents import Actor, Ask, Where
from adapters.dispatch.outcome import Done, Drop, Outcome, Refusal
from adapters.policy import Policy
from core.stores import InMemoryEventClaims, Stores
from core.trace import Trace

POLICY = Policy("telegram", merge_window=0.3)
ANN = Actor("telegram", "5", "telegram:5", "ann")
GROUP = Where("telegram", "channel", "-100")


def asked(
    text: str, *, event: str, actor: Actor = ANN, where: Where = GROUP, gathers: bool = True
) -> Ask[str]:
    return Ask(event=event, actor=actor, where=where, question=text, gathers=gathers, who="w")


async def test_a_claim_drops_the_second_delivery_silently() -> None:
    claim = Claim(InMemoryEventClaims())
    assert await claim(Admission(asked("q", event="telegram:message:-100:1"), POLICY)) is None
    again = await claim(Admission(asked("q", event="telegram:message:-100:1"), POLICY))
    assert again == Drop("duplicate")
    assert await claim(Admission(asked("q", event="telegram:message:-100:2"), POLICY)) is None


async def test_a_burst_is_one_question_in_the_first_ones_admission() -> None:
    burst: Burst[str] = Burst(POLICY)
    first = Admission(asked("What is 17*23", event="1"), POLICY)
    opened = asyncio.create_task(burst(first))
    await asyncio.sleep(0)  # the first opens the burst
    assert await burst(Admission(asked("plus 4?", event="2"), POLICY)) == Drop("merged")
    assert await opened is None
    assert first.intent.question == "What is 17*23\nplus 4?"
    assert first.intent.event == "1", "the first message's event is the run's"


async def test_other_people_and_other_conversations_are_bursts_of_their_own() -> None:
    burst: Burst[str] = Burst(POLICY)
    bob = Actor("telegram", "6", "telegram:6", "bob")
    topic = Where("telegram", "topic", "-100", thread="7")
    admissions = [
        Admission(asked("ann here", event="1"), POLICY),
        Admission(asked("bob here", event="2", actor=bob), POLICY),
        Admission(asked("ann in a topic", event="3", where=topic), POLICY),
    ]
    results = await asyncio.gather(*(burst(a) for a in admissions))
    assert results == [None, None, None]
    assert [a.intent.question for a in admissions] == ["ann here", "bob here", "ann in a topic"]


async def test_an_ask_that_does_not_gather_passes_at_once() -> None:
    burst: Burst[str] = Burst(POLICY)
    first = Admission(asked("a message", event="1"), POLICY)
    opened = asyncio.create_task(burst(first))
    await asyncio.sleep(0)
    command = Admission(asked("/ask now", event="2", gathers=False), POLICY)
    assert await burst(command) is None, "not held and not merged: its ack cannot wait"
    assert await opened is None
    assert first.intent.question == "a message"


async def test_retry_is_taken_once_and_a_refused_one_is_given_back() -> None:
    once = RetryOnce(InMemoryEventClaims())
    assert await once.take("run-1")
    assert not await once.take("run-1"), "a second press asks nothing"
    assert await once.take("run-2"), "per run"
    await once.give_back("run-1")  # that press was refused (busy): Retry may be pressed again
    assert await once.take("run-1")


async def test_ask_again_asks_once_and_gives_a_refused_retry_back() -> None:
    """``handlers.retry.ask_again``, the whole Retry any surface presses: the trace's
    question is asked; refused, the run is given back (Retry may be pressed again);
    admitted, a later press is told it was used; another conversation's run is gone."""
    stores = Stores.in_memory()
    await stores.traces.save(Trace(question="what now?", conversation="x:c", id="r1"))
    once = RetryOnce(InMemoryEventClaims())
    asked: list[str] = []
    answers: list[Outcome] = [Refusal("busy", "busy"), Done()]

    async def ask(question: str) -> Outcome:
        asked.append(question)
        return answers.pop(0)

    def again(places: set[str]) -> asyncio.Future[Outcome]:
        return asyncio.ensure_future(
            ask_again("r1", places, traces=stores.traces, once=once, ask=ask)
        )

    assert await again({"x:other"}) == Refusal("gone", words.RETRY_GONE)
    assert await again({"x:c"}) == Refusal("busy", "busy")  # refused: given back
    assert await again({"x:c"}) == Done()
    assert await again({"x:c"}) == Refusal("retried", words.RETRY_DONE)
    assert asked == ["what now?", "what now?"]
