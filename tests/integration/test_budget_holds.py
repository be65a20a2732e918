"""Budgets with what running questions hold (issue 47 item 2): one person sending four
questions at the same moment to two processes on one real Redis, each run costing $1.50
against ``budgets.usd_per_user_per_day: 1``, spent $3.00 of $1.00 when a budget was only
read before a run and counted after it. Now the first question holds what is left, in the
same atomic step as the check, and the others are told how much is left and why; a question
whose process died holds nothing once its run lease has lapsed.

The questions go through the real answering pipeline (the admission chain every surface
shares: budgets, cooldown, room, the per-person run slots on Redis) of two processes, each
with its own Redis client, and their runs through a real ``Agent`` and a priced model."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from adapters.channels import ChannelChoices
from adapters.dispatch.checks import Admitted as Ask
from adapters.dispatch.checks import Ticket
from adapters.dispatch.handlers.ask import Answering
from adapters.dispatch.intents import Actor, Where
from adapters.dispatch.outcome import Refusal
from adapters.policy import Policy
from core.agent import Agent
from core.budgets import TokenBudgets
from core.llm import Usage
from core.pricing import Price
from core.scripted import ScriptedModel, Turn
from core.stores import Stores
from core.stores.redis import RedisStores
from core.tools import ToolRegistry
from tests.replies import Reply

ANSWER = Turn("Thought: I know.\nFinal Answer: yes.", usage=Usage(1000, 0))
PRICE = Price(input=1500.0, output=0.0)
"""1,000 prompt tokens at $1,500 per million: each run costs $1.50."""


def ask(n: int) -> Ask[str]:
    return Ask(
        who="ada",
        actor=Actor("slack", "U1", "slack:T1:U1", "Ada", admin=False),
        at=Where("slack", "channel", "C1", space="T1"),
        place=f"slack:T1:C{n}",
        question=f"question {n}",
        ident=f"slack:event:{n}",
    )


@asynccontextmanager
async def process(
    shared: RedisStores, *, run_lease: float = 240.0, turns: Sequence[Turn] = (ANSWER,) * 4
) -> AsyncIterator[Answering[str]]:
    """One replica's answering pipeline on its own Redis client (``usd_per_user_per_day: 1``,
    two runs per person, no cooldown: the per-person slot is the only other limit)."""
    stores = Stores.on(shared)
    tools = ToolRegistry()
    agent = Agent(ScriptedModel(list(turns)), tools, stores=stores, prices={"scripted": PRICE})
    answering: Answering[str] = Answering(
        agent,
        surface="slack",
        policy=Policy(
            "slack", cooldown_seconds=0, max_runs_per_user=2, lease=run_lease, hold_at_most=240
        ),
        stores=stores,
        budgets=TokenBudgets(stores.usage, usd_per_user=1.0),
        choices=ChannelChoices(stores.channel_settings, tools=tools),
        empty_question="Ask.",
        quote=str,
    )
    await answering.start()
    try:
        yield answering
    finally:
        await answering.aclose(grace=5)


async def test_four_questions_at_once_on_two_processes_spend_at_most_one_runs_overshoot(
    two_processes: list[RedisStores],
) -> None:
    async with process(two_processes[0]) as one, process(two_processes[1]) as two:
        pipelines = [one, two, one, two]
        admitted = await asyncio.gather(*(p.admit(ask(n)) for n, p in enumerate(pipelines)))
        tickets = [
            (p, t) for p, t in zip(pipelines, admitted, strict=True) if isinstance(t, Ticket)
        ]
        await asyncio.gather(
            *(p.answer(t, Reply(f"slack:T1:C{n}")) for n, (p, t) in enumerate(tickets))
        )
        spent = (await one.budgets.usage("slack:T1:U1", "slack:T1:C0")).user_usd
    assert spent <= 1.50, f"${spent:.2f} spent of $1.00 ({len(tickets)} runs admitted)"
    assert len(tickets) == 1
    refusals = [r for r in admitted if isinstance(r, Refusal)]
    assert {r.reason for r in refusals} == {"budget"}
    assert {r.text.split(";")[0] for r in refusals} == {
        "Your questions still running hold the $1.00 left of your $1.00 for today"
    }


async def test_a_question_whose_process_died_holds_nothing_after_its_run_lease(
    two_processes: list[RedisStores],
) -> None:
    """The first process admits a question and dies before it runs or gives anything back
    (as a ``kill -9`` leaves it): no renewal, no settling. Its hold lapses with its lease."""
    async with (
        process(two_processes[0], run_lease=0.5) as dead,
        process(two_processes[1], run_lease=0.5) as live,
    ):
        held = await dead.admit(ask(1))
        assert isinstance(held, Ticket)  # and then never answered nor given back
        refused = await live.admit(ask(2))
        assert isinstance(refused, Refusal) and refused.reason == "budget"
        await asyncio.sleep(0.6)  # the dead process's run lease, on Redis's clock
        again = await live.admit(ask(3))
        assert isinstance(again, Ticket), again
        await live.answer(again, Reply("slack:T1:C3"))
        usage = await live.budgets.usage("slack:T1:U1", "slack:T1:C3")
        assert usage.user_usd == 1.50, "the live run counted, the dead one's hold gone"


async def test_the_process_that_finishes_a_dead_ones_answer_settles_its_hold(
    two_processes: list[RedisStores],
) -> None:
    """A process stops beating mid-answer (its first step, 200 prompt tokens, $0.30, done;
    the next model call hangs): the live process that finishes the answer as interrupted
    counts what its trace spent and drops its hold at once, though the frozen process would
    keep renewing it."""
    step = Turn("Thought: look.\nAction: lookup[x]", usage=Usage(200, 0))
    hang = Turn("Thought: still", stall_after=0)
    async with (
        process(two_processes[0], run_lease=2.0, turns=[step, hang]) as frozen,
        process(two_processes[1], run_lease=2.0) as live,
    ):
        ticket = await frozen.admit(ask(1))
        assert isinstance(ticket, Ticket)
        answering = asyncio.create_task(frozen.answer(ticket, Reply("slack:T1:C1")))
        client, runs = two_processes[0].client, two_processes[0].runs
        steps = runs._tagged("inflight-steps", "slack") + ":*"  # each finished step, written

        async def priced_step_written() -> bool:
            async for key in client.scan_iter(match=steps):
                if "cost_usd" in str(await client.lrange(key, 0, -1)):
                    return True
            return False

        async with asyncio.timeout(5):  # its heartbeat carries the priced step
            while not await priced_step_written():  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        await frozen.recovery.aclose()  # no more heartbeats: an orphan once its 2 s lease lapses
        refused = await live.admit(ask(2))
        assert isinstance(refused, Refusal) and refused.reason == "budget"
        async with asyncio.timeout(15):
            while not live.recovery.recovered:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        usage = await live.budgets.usage("slack:T1:U1", "slack:T1:C1")
        assert usage.user_usd == 0.30, "what the dead run spent, from its last heartbeat"
        again = await live.admit(ask(3))  # the frozen process still renews its hold
        assert isinstance(again, Ticket), again
        await again.give_back()
        answering.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await answering
