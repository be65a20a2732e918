"""Test helper: the in-memory bundle with some of its stores given by the test."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from core.budgets import Line, Standing, TokenBudgets, UsageCounters
from core.stores import Stores


def in_memory_stores(**given: Any) -> Stores:
    """``Stores.in_memory()`` with each store named in ``given`` (None: the default)."""
    return dataclasses.replace(
        Stores.in_memory(), **{name: store for name, store in given.items() if store is not None}
    )


async def refusal(
    budgets: TokenBudgets, user: str, channel: str, *, exempt: bool = False
) -> str | None:
    """What a question would be told now (None: admitted): held, and given back at once."""
    held = await budgets.hold(user, channel, run="probe", lease=60, exempt=exempt)
    if isinstance(held, str):
        return held
    await budgets.release(held)
    return None


DAY_END = 4102444800.0
"""2100-01-01: the counters of these checks outlive them."""


async def check_budget_holds(
    counters: UsageCounters, advance: Callable[[float], Awaitable[None]], *, day: str
) -> None:
    """The reservation rule every ``UsageCounters`` keeps (``core.budgets``), run on memory
    and on Redis: ``advance(seconds)`` lets that much of the store's time pass."""
    ada, usd = f"{day}:user:ada", f"{day}:usd:user:ada"
    lines = [Line(usd, 1_000_000, 600_000), Line(ada, 100, 1000)]
    assert await counters.hold("r1", lines, lease=60, expire_at=DAY_END) is None
    # r1 holds 0.6 of the dollar and all 100 tokens (at most what is left): r2 sees it
    stood = await counters.hold("r2", lines, lease=60, expire_at=DAY_END)
    assert stood == [Standing(0, 600_000), Standing(0, 100)], "up to the line that refused"
    assert await counters.hold("r1", lines, lease=60, expire_at=DAY_END) is None, "its own"
    assert await counters.hold("r2", lines[:1], lease=60, expire_at=DAY_END) is None
    assert await counters.hold("r3", lines[:1], lease=60, expire_at=DAY_END) == [
        Standing(0, 1_000_000)
    ], "r1 and r2 hold the whole dollar between them"
    # settled: r1's real cost counted and its hold dropped in one step
    await counters.settle("r1", [usd, ada], [700_000, 40], expire_at=DAY_END)
    assert await counters.get([usd, ada]) == [700_000, 40]
    assert await counters.hold("r3", lines, lease=60, expire_at=DAY_END) == [
        Standing(700_000, 400_000)
    ]
    await counters.settle("r2", [usd], [0], expire_at=DAY_END)  # given back, nothing spent
    # r3 holds what is left, and renewed it outlives its first lease (which is a second, so
    # that a loaded machine renews it in time: the checks below wait for time, never race it)
    assert await counters.hold("r3", lines, lease=1.0, expire_at=DAY_END) is None
    await counters.renew("r3", [usd, ada], lease=60)
    await advance(1.1)
    assert await counters.hold("r4", lines[::-1], lease=0.2, expire_at=DAY_END) == [
        Standing(40, 60)
    ], "renewed, r3 still holds what was left"
    await counters.renew("r3", [usd, ada], lease=0.2)  # its last beat
    await advance(0.3)  # r3's process died: it renewed nothing more, and its hold lapsed
    assert await counters.hold("r4", lines, lease=60, expire_at=DAY_END) is None
    await counters.settle("r4", [usd, ada], [0, 0], expire_at=DAY_END)
    assert await counters.get([usd, ada]) == [700_000, 40], "holds are never counts"
