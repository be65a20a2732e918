"""Daily token budgets: counted per UTC day from the usage the model reported, refused in
one line once spent, reset at midnight UTC, admins exempt, and never blocking on a store
outage."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.budgets import (
    Hold,
    InMemoryUsageCounters,
    Line,
    Standing,
    TokenBudgets,
    run_tokens,
)
from core.errors import StoreUnavailable
from core.pricing import MICRO_USD, micro_usd
from core.trace import Trace, TraceStep
from tests.stores import check_budget_holds, refusal

NOON = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC).timestamp()


def spent(prompt: int, completion: int, *more: tuple[int, int]) -> Trace:
    trace = Trace(question="q")
    for i, (p, c) in enumerate(((prompt, completion), *more), start=1):
        trace.steps.append(TraceStep(index=i, prompt_tokens=p, completion_tokens=c))
    return trace


def priced(usd: float) -> Trace:
    return Trace(question="q", steps=[TraceStep(index=1, prompt_tokens=1, cost_usd=usd)])


def budgets(now: list[float], **limits: int) -> TokenBudgets:
    clock = lambda: now[0]  # noqa: E731
    return TokenBudgets(InMemoryUsageCounters(clock=clock), clock=clock, **limits)


def test_a_run_counts_every_call_it_made() -> None:
    assert run_tokens(spent(100, 20, (130, 5))) == 255
    assert run_tokens(Trace(question="q")) == 0
    trace = spent(1, 1)
    trace.steps.append(TraceStep(index=2))  # a call that reported no usage
    assert run_tokens(trace) == 2


async def test_the_user_limit_refuses_once_reached_and_says_when_it_resets() -> None:
    now = [NOON]
    b = budgets(now, per_user=300)
    assert await refusal(b, "u1", "c1") is None
    await b.count("u1", "c1", spent(200, 50))
    assert await refusal(b, "u1", "c1") is None  # 250 < 300
    await b.count("u1", "c1", spent(200, 50))  # one run may take it past the limit
    line = await refusal(b, "u1", "c1")
    assert line == (
        "You have used your 300 tokens for today; ask again after the reset "
        "at 00:00 UTC (in 12 h 0 min)."
    )
    assert await refusal(b, "u2", "c1") is None, "per user"
    assert await refusal(b, "u1", "c1", exempt=True) is None, "admins are exempt"
    now[0] += 12 * 3600  # midnight UTC: a new day
    assert await refusal(b, "u1", "c1") is None
    assert (await b.usage("u1", "c1")).user_tokens == 0


async def test_the_channel_limit_holds_everyone_in_it() -> None:
    b = budgets([NOON], per_channel=100)
    await b.count("u1", "c1", spent(90, 10))
    line = await refusal(b, "u2", "c1")
    assert line is not None and line.startswith("This channel has used its 100 tokens for today")
    assert await refusal(b, "u2", "c2") is None


async def test_without_limits_nothing_is_refused_and_usage_still_tells_the_truth() -> None:
    b = budgets([NOON])
    await b.count("u1", "c1", spent(10**9, 10**9))
    assert await refusal(b, "u1", "c1") is None
    used = await b.usage("u1", "c1")  # was 0: "You have used 0 tokens today" after a run
    assert used.user_tokens == 2 * 10**9
    assert b.describe(used).startswith("You have used 2,000,000,000 tokens today (no daily")


async def test_usage_describes_the_count_and_the_limits() -> None:
    now = [NOON + 3 * 3600 + 120]
    b = budgets(now, per_user=10_000, per_channel=50_000)
    await b.count("u1", "c1", spent(1200, 34))
    text = b.describe(await b.usage("u1", "c1"))
    assert text == (
        "You have used 1,234 tokens of your 10,000 for today. This channel: 1,234 of 50,000. "
        "Counts reset at 00:00 UTC (in 8 h 58 min)."
    )


class Down:
    async def add(self, key: str, amount: int, *, expire_at: float) -> int:
        raise StoreUnavailable("Redis at 127.0.0.1:1 failed to count tokens")

    async def get(self, keys: Sequence[str]) -> list[int]:
        raise StoreUnavailable("Redis at 127.0.0.1:1 failed to read token counts")

    async def hold(
        self, run: str, lines: Sequence[Line], *, lease: float, expire_at: float
    ) -> list[Standing] | None:
        raise StoreUnavailable("Redis at 127.0.0.1:1 failed to hold a budget")

    async def renew(self, run: str, counters: Sequence[str], *, lease: float) -> None:
        raise StoreUnavailable("Redis at 127.0.0.1:1 failed to renew a budget hold")

    async def settle(
        self, run: str, counters: Sequence[str], amounts: Sequence[int], *, expire_at: float
    ) -> None:
        raise StoreUnavailable("Redis at 127.0.0.1:1 failed to count tokens")


async def test_a_store_outage_answers_and_logs_what_went_uncounted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    b = TokenBudgets(Down(), per_user=1)
    with caplog.at_level(logging.WARNING):
        assert await refusal(b, "u1", "c1") is None
        await b.count("u1", "c1", spent(5, 5))
    messages = [r.getMessage() for r in caplog.records]
    assert any("not checked" in m for m in messages)
    assert any("10 tokens of run" in m and "not counted" in m for m in messages)
    with pytest.raises(StoreUnavailable):
        await b.usage("u1", "c1")  # the command says it cannot read them, not "0 tokens"


async def test_every_usage_store_keeps_the_reservation_rule_in_memory() -> None:
    now = [NOON]

    async def advance(seconds: float) -> None:
        now[0] += seconds

    await check_budget_holds(InMemoryUsageCounters(clock=lambda: now[0]), advance, day="d")


def test_the_reserve_keys_come_from_the_file_or_the_environment() -> None:
    from bot.config import load_config

    env = {"REACTBOT_BUDGETS__RESERVE_USD": "0.25", "REACTBOT_BUDGETS__RESERVE_TOKENS": "900"}
    budgets = load_config(None, env).budgets
    assert (budgets.reserve_usd, budgets.reserve_tokens) == (0.25, 900)
    assert load_config(None, {}).budgets.reserve_usd == 0


async def test_a_question_holds_the_reserve_or_the_askers_average_or_everything_left() -> None:
    now = [NOON]
    counters = InMemoryUsageCounters(clock=lambda: now[0])
    reserved = TokenBudgets(counters, clock=lambda: now[0], per_user=1000, reserve_tokens=300)
    held = [await reserved.hold("u1", "c1", run=f"r{n}", lease=60) for n in range(5)]
    assert [isinstance(h, Hold) for h in held] == [True] * 4 + [False], "300+300+300+100"
    assert held[4] == (
        "Your questions still running hold the 1,000 tokens left of your 1,000 tokens for "
        "today; ask again when they end, or after the reset at 00:00 UTC (in 12 h 0 min)."
    )
    for h in held[:4]:
        assert isinstance(h, Hold)
        await reserved.count("u1", "c1", spent(100, 0), hold=h)  # each cost 100: 400 spent
    average = TokenBudgets(counters, clock=lambda: now[0], per_user=1000)
    held = [await average.hold("u1", "c1", run=f"a{n}", lease=60) for n in range(8)]
    assert [isinstance(h, Hold) for h in held] == [True] * 6 + [False] * 2, "100 each, 600 left"
    first = TokenBudgets(counters, clock=lambda: now[0], per_user=1000)
    assert isinstance(await first.hold("u2", "c1", run="b1", lease=60), Hold)
    assert "the 1,000 tokens left" in str(await first.hold("u2", "c1", run="b2", lease=60))


async def test_a_run_that_ends_after_midnight_drops_yesterdays_hold() -> None:
    now = [NOON + 12 * 3600 - 1]
    b = budgets(now, per_user=1000)
    held = await b.hold("u1", "c1", run="r1", lease=60)
    assert isinstance(held, Hold)
    now[0] += 2  # the new day: its own counts, yesterday's hold dropped with them
    await b.count("u1", "c1", spent(10, 0), hold=held)
    assert (await b.usage("u1", "c1")).user_tokens == 10
    now[0] -= 2
    assert await refusal(b, "u1", "c1") is None, "nothing held on yesterday's counter"


@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("ask"), st.sampled_from(["c1", "c2"])),
            st.tuples(st.just("end"), st.integers(0, 20), st.floats(0.0, 1.0)),
        ),
        max_size=40,
    ),
    reserve=st.sampled_from([0.0, 0.1, 0.4, 2.0]),
    history=st.integers(0, 3),
)
def test_any_interleaving_of_questions_spends_at_most_the_limit_when_runs_cost_what_they_hold(
    steps: list[tuple[object, ...]], reserve: float, history: int
) -> None:
    """Questions admitted and ended in any order: what is counted plus what is held never
    passes the limit, so runs that cost at most what they held spend at most the limit."""
    asyncio.run(_interleaved(steps, reserve, history))


async def _interleaved(steps: list[tuple[object, ...]], reserve: float, history: int) -> None:
    now = [NOON]
    counters = InMemoryUsageCounters(clock=lambda: now[0])
    b = TokenBudgets(
        counters, clock=lambda: now[0], usd_per_user=1.0, usd_per_channel=0.7, reserve_usd=reserve
    )
    for n in range(history):  # earlier runs of the day: the average is what they cost
        await b.count("u", "c1", priced(0.05 * (n + 1)))
    limit = micro_usd(1.0)
    key = "2026-12-01:usd:user:u"
    running: list[Hold] = []
    for n, step in enumerate(steps):
        if step[0] == "ask":
            held = await b.hold("u", str(step[1]), run=f"r{n}", lease=600)
            if isinstance(held, Hold):
                running.append(held)
            else:
                assert " left of " in held or "spent" in held, held
        elif running:
            hold = running.pop(int(str(step[1])) % len(running))
            amount = counters._holds.get(key, {}).get(hold.run, (0, 0.0))[0]
            cost = int(amount * float(str(step[2])))  # at most what it held
            await b.count("u", "c1", priced(cost / MICRO_USD), hold=hold)
        (spent,) = await counters.get([key])
        held_now = sum(amount for amount, _ in counters._holds.get(key, {}).values())
        assert spent + held_now <= limit, (spent, held_now)
