"""Cost in money: a price turns reported usage into dollars (cached input priced apart), and
the daily dollar budgets are shared by two processes on one real Redis."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from core.budgets import TokenBudgets
from core.llm import Usage
from core.pricing import Price, format_usd, micro_usd
from core.stores import Stores
from core.stores.redis import RedisStores, RedisUsageCounters, connect
from core.trace import Trace, TraceStep, summary_line
from tests.stores import check_budget_holds, refusal


def test_a_price_counts_cached_input_apart() -> None:
    price = Price(input=2.0, output=8.0, cached_input=0.5)
    assert price.cost(Usage(1000, 100, 400)) == pytest.approx((600 * 2 + 400 * 0.5 + 800) / 1e6)
    assert Price(2.0, 8.0).cost(Usage(1000, 100, 400)) == pytest.approx((2000 + 800) / 1e6)
    assert micro_usd(0.0000001) == 1  # a spend never counts as free
    assert [format_usd(v) for v in (0.0004, 0.011, 1.4234)] == ["$0.0004", "$0.011", "$1.42"]


def priced_trace(cost: float) -> Trace:
    trace = Trace("q", steps=[TraceStep(1, prompt_tokens=10, completion_tokens=2, cost_usd=cost)])
    return trace


def test_the_trace_keeps_cost_per_step_and_shows_it() -> None:
    trace = priced_trace(0.0125)
    assert Trace.from_json(trace.to_json()).steps[0].cost_usd == 0.0125
    assert "$0.013" in summary_line(trace) and "$0.013" in trace.to_markdown()
    assert "$" not in summary_line(Trace("q", steps=[TraceStep(1, prompt_tokens=3)]))


async def test_dollar_budgets_are_shared_by_two_processes(
    redis_url: str, redis_prefix: str
) -> None:
    stores = [connect(redis_url, prefix=redis_prefix) for _ in range(2)]
    try:
        one, two = (
            TokenBudgets(RedisUsageCounters(s.client, prefix=redis_prefix), usd_per_user=0.05)
            for s in stores
        )
        assert await refusal(two, "ada", "c1") is None
        await one.count("ada", "c1", priced_trace(0.03))
        assert await refusal(two, "ada", "c1") is None
        await one.count("ada", "c2", priced_trace(0.03))
        refused = await refusal(two, "ada", "c3")
        assert refused is not None and "You have spent your $0.05 for today" in refused
        assert await refusal(two, "bob", "c1") is None
        report = await two.report("ada", "c1", admin=False)
        assert "Spent today: $0.06 of your $0.05." in report
    finally:
        for s in stores:
            await s.aclose()


async def test_every_usage_store_keeps_the_reservation_rule_on_redis(
    two_processes: list[RedisStores],
) -> None:
    one, _ = two_processes
    await check_budget_holds(one.usage, asyncio.sleep, day=uuid.uuid4().hex)
    resilient = Stores.on(one).resilient()  # as the bot has them: through the store's health
    await check_budget_holds(resilient.usage, asyncio.sleep, day=uuid.uuid4().hex)
    assert resilient.health is not None and resilient.health.failures == 0
