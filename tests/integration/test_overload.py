"""Overload never fails a run (issue 25 item 4): with the event loop blocked for 0.5 s again
and again, hundreds of runs on the real Redis stores all keep their memory, and a question
asked meanwhile is told at once that the bot is busy; once the loop is on time again, the
next one is answered.

The runs go through the real answering pipeline (the one every surface shares) on one Redis
client, more at once than its pool has connections (``MAX_CONNECTIONS``), so commands wait
for a connection while the loop is late: with redis-py's own timeouts those waits (and
reads) failed and the conversations went on without memory."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, nullcontext

from adapters.channels import ChannelChoices
from adapters.dispatch.checks import Admitted as Ask
from adapters.dispatch.checks import Ticket
from adapters.dispatch.handlers.ask import Answering
from adapters.dispatch.intents import Actor, Where
from adapters.dispatch.outcome import Refusal
from adapters.live import LiveStats, RunView, Verbosity
from adapters.policy import Policy
from adapters.room import BUSY, Room
from core.agent import Agent, Run
from core.budgets import TokenBudgets
from core.events import Event, Notice
from core.looplag import LoopLag
from core.memory import UNAVAILABLE
from core.scripted import ScriptedModel, Turn
from core.stores import Stores
from core.stores.redis import MAX_CONNECTIONS
from core.tools import ToolRegistry

CONVERSATIONS = MAX_CONNECTIONS + 50
"""More at once than the pool has connections: commands wait for one while the loop is late."""
BLOCK = 0.5
"""As long as the Redis client's own timeouts (``DEFAULT_TIMEOUT``): with plain ones, every
wait a block fell into failed."""
ON_TIME = 0.2
"""Seconds the loop runs on time between two blocks: the runs move on only then."""


class Follower:
    def __init__(self) -> None:
        self.stats = LiveStats()
        self.notices: list[str] = []

    async def follow(self, events: AsyncIterator[Event]) -> object:
        async for event in events:
            if isinstance(event, Notice):
                self.notices.append(event.text)
        return None


class Reply:
    def __init__(self, conversation: str, followers: list[Follower]) -> None:
        self.conversation = conversation
        self.followers = followers

    async def open(self, verbosity: Verbosity) -> str | None:
        return self.conversation

    def reading(self) -> AbstractAsyncContextManager[object]:
        return nullcontext()

    async def show(self, run: Run, view: RunView) -> Follower:
        follower = Follower()
        self.followers.append(follower)
        return follower

    async def note(self, text: str) -> None:
        return None

    async def ended(self, run: Run) -> None:
        return None

    def where(self) -> dict[str, str]:
        return {"channel": self.conversation}


def ask(n: int, round_: int) -> Ask[str]:
    return Ask(
        who="ok",
        actor=Actor("slack", f"U{n}", f"slack:T1:U{n}:{round_}", f"person {n}", admin=False),
        at=Where("slack", "channel", "C1", space="T1"),
        place=f"slack:T1:C{n}",
        question=f"question {round_} of conversation {n}",
        ident=f"slack:event:{n}:{round_}",
    )


async def block_the_loop_again_and_again(stop: asyncio.Event) -> int:
    blocks = 0
    while not stop.is_set():
        await asyncio.sleep(ON_TIME)
        time.sleep(BLOCK)  # noqa: ASYNC251 - a loop that runs late is the point
        blocks += 1
    return blocks


async def punctual_again(room: Room) -> None:
    """Once the loop has been on time for the probe's window, the room admits again."""
    deadline = time.monotonic() + 10
    while room.full() is not None:
        assert time.monotonic() < deadline, f"still refused: {room.full()}"
        await asyncio.sleep(0.05)


async def test_a_lagging_loop_fails_no_run_and_refuses_new_questions_politely(
    redis_url: str, redis_prefix: str
) -> None:
    turn = Turn("Thought: I know this one.\nFinal Answer: " + "it is fine. " * 20, chunk_size=5)
    model = ScriptedModel([turn] * (2 * CONVERSATIONS + 1))
    stores = Stores.redis(redis_url, prefix=redis_prefix).resilient()  # as the bot has them
    tools = ToolRegistry()
    agent = Agent(model, tools, stores=stores)
    room = Room(1000, lag=LoopLag(), max_lag=0.25)
    answering: Answering[str] = Answering(
        agent,
        surface="slack",
        # The lease it ran with before the policy's default became agent.lease_seconds (25 s):
        # this is about admission under a late loop, not about runs whose beats come later
        # than their lease (a run that ends then may be taken for an orphan: see the report
        # of issue 41's slice 5).
        policy=Policy("slack", cooldown_seconds=0, lease=240),
        stores=stores,
        budgets=TokenBudgets(stores.usage),
        choices=ChannelChoices(stores.channel_settings, tools=tools),
        empty_question="Ask.",
        quote=str,
        room=room,
    )
    await answering.start()
    followers: list[Follower] = []
    refused: list[Refusal] = []
    machine_late = 0
    try:
        for round_ in (1, 2):  # the second round reads what the first one wrote
            tickets: list[tuple[int, Ticket[str]]] = []
            for n in range(CONVERSATIONS):  # admitted while the loop is on time
                ticket = await answering.admit(ask(n, round_))
                while isinstance(ticket, Refusal) and ticket.reason == "overloaded":
                    # A busy machine made the loop late, not this test: once on time again,
                    # asked again (the refusals counted below are those while it blocks).
                    machine_late += 1
                    await punctual_again(room)
                    ticket = await answering.admit(ask(n, round_))
                assert isinstance(ticket, Ticket), ticket
                tickets.append((n, ticket))
            stop = asyncio.Event()
            blocker = asyncio.create_task(block_the_loop_again_and_again(stop))
            answers = [
                asyncio.create_task(
                    answering.answer(ticket, Reply(f"slack:T1:C{n}:1.0", followers))
                )
                for n, ticket in tickets
            ]
            await asyncio.sleep(BLOCK)  # the loop is late now
            for n in range(3):
                late = await answering.admit(ask(CONVERSATIONS + n, round_))
                assert isinstance(late, Refusal), "a question asked while the loop is late"
                refused.append(late)
            async with asyncio.timeout(120):
                await asyncio.gather(*answers)
            stop.set()
            assert await blocker >= 2, "the loop was blocked while the runs went on"
            await punctual_again(room)
        again = await answering.admit(ask(CONVERSATIONS + 10, 3))
        while isinstance(again, Refusal) and again.reason == "overloaded":
            machine_late += 1  # late again from the machine's load: on time, asked again
            await punctual_again(room)
            again = await answering.admit(ask(CONVERSATIONS + 10, 3))
        assert isinstance(again, Ticket), again
        await again.give_back()
    finally:
        await answering.aclose(grace=5)
        health = stores.health
        conversations = [f"slack:T1:C{n}:1.0" for n in range(CONVERSATIONS)]
        histories = [await stores.history.load(c) for c in conversations]
        await stores.aclose()

    assert len(followers) == 2 * CONVERSATIONS, "every run was shown and followed"
    assert health is not None and health.failures == 0, health.last_error
    assert not [f for f in followers if any(UNAVAILABLE in n for n in f.notices)]
    for history in histories:  # both questions and both answers, in every conversation
        assert [m["role"] for m in history] == ["user", "assistant"] * 2, history
    assert {r.reason for r in refused} == {"overloaded"}
    assert {r.text for r in refused} == {BUSY}
    assert room.refused["slack", "overloaded"] == len(refused) + machine_late
    assert room.taken == 0, "every run gave its room back"
