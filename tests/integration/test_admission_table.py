"""One admission table through both surfaces: the same people asking the same things get the
same decisions on Discord (discord.py against the fake Discord's gateway and REST) and on
Slack (the bolt app over HTTP against the fake Slack), and where a refusal is the pipeline's
own (question bounds, budgets, cooldown, runs per person) the asker reads the same words."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from adapters.dispatch.handlers.ask import Answering
from core.budgets import InMemoryUsageCounters, TokenBudgets
from core.llm import Usage
from core.scripted import Turn
from tests.fakes.discord_server import CHANNEL_ID, ROLE_ID
from tests.integration.test_discord import Harness as DiscordHarness
from tests.integration.test_discord import content_of, running
from tests.integration.test_slack_app import Harness as SlackHarness
from tests.integration.test_slack_app import fake, make  # noqa: F401 - fixtures

QUICK = Turn("Thought: easy.\nAction: finish[ok]", usage=Usage(500, 40))
STALLING = Turn("Thought: thinking for a long while", chunk_size=4, stall_after=2)
LONG = "why " * 2_000

# The personas, as each surface names them.
DISCORD = {"member": 1001, "stranger": 1002, "admin": 1003}
SLACK = {"member": "U1ADA", "stranger": "U9STRANGER", "admin": "UADMIN"}


@dataclass(frozen=True)
class Row:
    name: str
    asks: tuple[tuple[str, str], ...]
    """(persona, question), in order; each is decided before the next is asked."""
    expected: tuple[str, ...]
    """The decision on each ask: "admitted" or the refusing check's reason."""
    turns: tuple[Turn, ...] = ()
    cooldown: float = 0.0
    runs_per_user: int = 2
    budget: int = 0
    only_members: bool = False
    """Discord: ``allowed_users`` is the member alone; Slack likewise."""
    elsewhere: bool = False
    """Discord: only a role the asker lacks may ask; Slack: only another channel."""
    discord: dict[str, Any] = field(default_factory=dict)


ROWS = [
    Row("a stranger", (("stranger", "hi"),), ("access",), only_members=True),
    Row("outside the allowed roles or channels", (("member", "hi"),), ("access",), elsewhere=True),
    Row("an over-long question", (("member", LONG),), ("question",)),
    Row(
        "the day's budget spent",
        (("member", "first"), ("member", "second")),
        ("admitted", "budget"),
        turns=(QUICK,),
        budget=100,
    ),
    Row(
        "the cooldown",
        (("member", "first"), ("member", "second")),
        ("admitted", "cooldown"),
        turns=(QUICK,),
        cooldown=60,
    ),
    Row(
        "too many runs at once",
        (("member", "first"), ("member", "second")),
        ("admitted", "busy"),
        turns=(STALLING,),
        runs_per_user=1,
    ),
    Row(
        "an admin, past the cooldown and the lists",
        (("admin", "first"), ("admin", "second")),
        ("admitted", "admitted"),
        turns=(QUICK, QUICK),
        cooldown=60,
        only_members=True,
    ),
]


async def decided(answering: Answering[Any], count: int) -> None:
    async with asyncio.timeout(10):
        while sum(answering.decisions.values()) < count:  # noqa: ASYNC110 - the bot's own count
            await asyncio.sleep(0.01)


async def through_discord(row: Row) -> tuple[Counter[str], list[str]]:
    settings: dict[str, Any] = {
        "cooldown_seconds": row.cooldown,
        "max_runs_per_user": row.runs_per_user,
        "admin_users": (DISCORD["admin"],),
    }
    if row.only_members:
        settings["allowed_users"] = (DISCORD["member"],)
    if row.elsewhere:
        settings["allowed_roles"] = (ROLE_ID,)
    budgets = TokenBudgets(InMemoryUsageCounters(), per_user=row.budget)
    async with running(list(row.turns), budgets=budgets, **settings) as h:
        answering = cog_of(h).answering
        for n, (persona, question) in enumerate(row.asks, start=1):
            await h.mention(question, author_id=DISCORD[persona])
            await decided(answering, n)
            if row.budget:
                await h.settled()  # its tokens are counted before the next is asked
        refused = sum(r != "admitted" for r in row.expected)
        async with asyncio.timeout(10):  # a refusal is replied to after it is decided
            while len(refusals := replies(h)) < refused:  # noqa: ASYNC110 - the fake's record
                await asyncio.sleep(0.01)
        for run_id in answering.running:
            await answering.stop(run_id, by="the test")
        return Counter(answering.decisions), refusals


def replies(h: DiscordHarness) -> list[str]:
    """What the bot wrote in the channel besides its placeholders: the refusals."""
    texts = [content_of(c) for c in h.fake.calls_to("POST", f"/{CHANNEL_ID}/messages")]
    return [t for t in texts if t and "Starting" not in t]


def cog_of(h: DiscordHarness) -> Any:
    assert h.bot.cog is not None
    return h.bot.cog


async def through_slack(
    row: Row, build: Callable[..., Awaitable[SlackHarness]]
) -> tuple[Counter[str], list[str]]:
    overrides: dict[str, Any] = {
        "cooldown_seconds": row.cooldown,
        "max_runs_per_user": row.runs_per_user,
        "streaming": "update",
    }
    if row.only_members:
        overrides["allowed_users"] = frozenset({SLACK["member"]})
    if row.elsewhere:
        overrides["allowed_channels"] = frozenset({"C0ELSEWHERE"})
    budgets = TokenBudgets(InMemoryUsageCounters(), per_user=row.budget)
    h = await build(list(row.turns), budgets=budgets, **overrides)
    refusals = []
    for persona, question in row.asks:
        _, body, _ = await h.ask(question, user=SLACK[persona])
        text = json.loads(body)["text"]
        if "Working on it" not in text:
            refusals.append(text)
        if row.budget:
            await h.settled()
    for run_id in h.bot.running:
        await h.bot.answering.stop(run_id, by="the test")
    await h.settled()
    return Counter(h.bot.answering.decisions), refusals


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
async def test_discord_and_slack_decide_alike(row: Row, make: Any) -> None:  # noqa: F811
    on_discord, discord_said = await through_discord(row)
    on_slack, slack_said = await through_slack(row, make)
    expected = Counter(row.expected)
    assert on_discord == expected, "Discord"
    assert on_slack == expected, "Slack"
    refused = [r for r in row.expected if r != "admitted"]
    assert len(discord_said) == len(slack_said) == len(refused)
    for reason, on_d, on_s in zip(refused, discord_said, slack_said, strict=True):
        if reason != "access":  # the pipeline's own words, not a surface's rule
            assert on_d == on_s, reason
