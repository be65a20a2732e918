"""Daily token and dollar budgets: one person (or one channel) cannot spend everyone's model
budget.

Dollars are counted like tokens, in whole millionths of a dollar (``core.pricing``), from the
cost of a run's steps (known when its model has a ``price``); a run without a price costs
nothing here, and only its tokens count.

A run's tokens are the usage its model reported (prompt + completion, every call of the run),
counted when the run ends, per UTC day, in ``UsageCounters`` that every replica shares
(Redis) or in memory. Admins are exempt.

Running questions hold part of the budget (the reservation rule, ``hold``): a question is
admitted only while its asker's and its channel's limits have something left after what the
questions still running hold, and at admission it holds an estimate of its own cost, at most
what is left: ``budgets.reserve_usd`` / ``budgets.reserve_tokens`` when set, else the asker's
average run of the day (the day's count over the day's runs), else (no run yet today)
everything that is left. Check and hold are one atomic step in the store, so questions sent
at once to any number of processes cannot all see the same money left. When the run ends its
real cost is counted and its hold dropped in one step (``count``); a hold is renewed with the
run's slot and expires one run lease after its last renewal, so a process that dies leaves
nothing held for long, and the process that finishes its orphaned answer settles the hold
with what the trace says was spent. So a day's spending passes a limit only by what the runs
admitted last cost beyond what they held: by one run's overshoot while runs hold everything
left (the first of the day, or a reserve at least a run's cost).

When the counters cannot be reached, questions are answered (a budget outage must not take
the bot down with it) and the tokens of that run go uncounted; both are logged.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from core.errors import StoreUnavailable
from core.pricing import MICRO_USD, format_usd, micro_usd
from core.stores.memory import InMemoryUsageCounters
from core.stores.protocols import UsageCounters
from core.stores.records import Line, Standing, up_to_refusal
from core.trace import Trace

__all__ = [
    "ALL_LEFT",
    "UNREADABLE",
    "Hold",
    "InMemoryUsageCounters",
    "Line",
    "Standing",
    "TokenBudgets",
    "Usage",
    "UsageCounters",
    "refused",
    "run_tokens",
    "up_to_refusal",
]

log = logging.getLogger(__name__)

UNREADABLE = "I cannot read the counts right now: the shared store is unavailable."


ALL_LEFT = 10**15
"""An estimate that holds everything a line has left (no run of the asker's yet today)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """What one person has used today, and what they may."""

    user_tokens: int
    user_limit: int
    channel_tokens: int
    channel_limit: int
    resets_at: float
    user_usd: float = 0.0
    user_usd_limit: float = 0.0
    channel_usd: float = 0.0
    channel_usd_limit: float = 0.0

    def describe(self, now: float) -> str:
        mine = f"{self.user_tokens:,} tokens"
        if self.user_limit:
            mine += f" of your {self.user_limit:,} for today"
        else:
            mine += " today (no daily limit for you)"
        line = f"You have used {mine}."
        if self.user_usd or self.user_usd_limit:
            line += f" Spent today: {_spend(self.user_usd, self.user_usd_limit, 'your ')}."
        if self.channel_limit:
            line += f" This channel: {self.channel_tokens:,} of {self.channel_limit:,}."
        if self.channel_usd_limit:
            line += f" This channel spent {_spend(self.channel_usd, self.channel_usd_limit, '')}."
        return f"{line} Counts reset {_reset_phrase(self.resets_at, now)}."


def _spend(usd: float, limit: float, whose: str) -> str:
    shown = format_usd(usd)
    return f"{shown} of {whose}{format_usd(limit)}" if limit else shown


def _reset_phrase(resets_at: float, now: float) -> str:
    left = max(0, int(resets_at - now))
    hours, minutes = divmod((left + 59) // 60, 60)
    wait = f"{hours} h {minutes} min" if hours else f"{minutes} min"
    return f"at 00:00 UTC (in {wait})"


Whose = Literal["usd:user", "usd:channel", "user", "channel"]
"""Which limit a line is: the asker's or the channel's, in dollars or in tokens."""


def refused(whose: Whose, limit: int, stood: Standing, when: str) -> str:
    """The one line that says a question is not answered now, and how much is left: nothing
    (spent), or what the questions still running hold."""
    usd = whose.startswith("usd:")
    mine = whose.endswith("user")

    def amount(micros: int) -> str:
        return format_usd(micros / MICRO_USD) if usd else f"{micros:,} tokens"

    total = format_usd(limit / MICRO_USD) if usd else f"{limit:,} tokens"
    if stood.used >= limit:
        done = "spent" if usd else "used"
        who = f"You have {done} your" if mine else f"This channel has {done} its"
        return f"{who} {total} for today; ask again after the reset {when}."
    left = amount(limit - stood.used)
    who = "Your questions still running hold" if mine else "Questions running in this channel hold"
    whose_total = f"your {total}" if mine else f"its {total}"
    return (
        f"{who} the {left} left of {whose_total} for today; ask again when they end, "
        f"or after the reset {when}."
    )


def _micro_limit(usd: float) -> int:
    return micro_usd(usd) if usd else 0


@dataclass(frozen=True, slots=True)
class Hold:
    """What one admitted question holds (``counters`` empty: nothing, as for an admin)."""

    run: str
    counters: tuple[str, ...] = ()


class TokenBudgets:
    """Daily limits per user and per channel (0: no limit) over shared counters, with the
    holds of the questions still running (``reserve_usd`` / ``reserve_tokens``: what each
    holds; 0: the asker's average run of the day, or everything left before their first)."""

    def __init__(
        self,
        counters: UsageCounters,
        *,
        per_user: int = 0,
        per_channel: int = 0,
        usd_per_user: float = 0.0,
        usd_per_channel: float = 0.0,
        reserve_tokens: int = 0,
        reserve_usd: float = 0.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.counters = counters
        self.per_user = per_user
        self.per_channel = per_channel
        self.usd_per_user = usd_per_user
        self.usd_per_channel = usd_per_channel
        self.reserve_tokens = reserve_tokens
        self.reserve_usd = reserve_usd
        self._clock = clock

    @property
    def enabled(self) -> bool:
        return self.tokens_enabled or self.usd_enabled

    @property
    def tokens_enabled(self) -> bool:
        return self.per_user > 0 or self.per_channel > 0

    @property
    def usd_enabled(self) -> bool:
        return self.usd_per_user > 0 or self.usd_per_channel > 0

    def _day(self) -> tuple[str, float]:
        """Today's UTC date and when it ends (epoch seconds)."""
        today = dt.datetime.fromtimestamp(self._clock(), dt.UTC).date()
        end = dt.datetime.combine(today + dt.timedelta(days=1), dt.time(), dt.UTC)
        return today.isoformat(), end.timestamp()

    def _keys(self, user: str, channel: str) -> tuple[str, str, float]:
        day, ends = self._day()
        return f"{day}:user:{user}", f"{day}:channel:{channel}", ends

    def _usd_keys(self, user: str, channel: str) -> tuple[str, str]:
        """Millionths of a dollar, beside the token counts of the same day."""
        day, _ = self._day()
        return f"{day}:usd:user:{user}", f"{day}:usd:channel:{channel}"

    def _runs_key(self, user: str) -> str:
        """The asker's runs counted today: their average run is the day's count over it."""
        day, _ = self._day()
        return f"{day}:runs:user:{user}"

    def _all_keys(self, user: str, channel: str) -> tuple[list[str], float]:
        user_key, channel_key, ends = self._keys(user, channel)
        return [user_key, channel_key, *self._usd_keys(user, channel)], ends

    # ---- admission: the reservation rule ------------------------------------------------
    async def hold(
        self, user: str, channel: str, *, run: str, lease: float, exempt: bool = False
    ) -> Hold | str:
        """Admit the question ``run`` and hold its estimate for ``lease`` seconds (renewed
        with ``renew``, settled by ``count``), or the one line that says why it is not
        answered now and how much is left."""
        if exempt or not self.enabled:
            return Hold(run)
        _, ends = self._day()
        try:
            kinds = await self._lines(user, channel)
            lines = [line for _, line in kinds]
            stood = await self.counters.hold(run, lines, lease=lease, expire_at=ends)
        except StoreUnavailable as exc:
            log.warning("budgets not checked: %s", exc)
            return Hold(run)
        if stood is None:
            return Hold(run, tuple(line.counter for line in lines))
        when = _reset_phrase(ends, self._clock())
        for (kind, line), s in zip(kinds, stood, strict=False):
            if s.used + s.held >= line.limit:
                return refused(kind, line.limit, s, when)
        return refused(kinds[0][0], kinds[0][1].limit, stood[0], when)  # the store said no

    async def _lines(self, user: str, channel: str) -> list[tuple[Whose, Line]]:
        """Every limit set, dollars first, the asker's before the channel's."""
        user_key, channel_key, _ = self._keys(user, channel)
        usd_user, usd_channel = self._usd_keys(user, channel)
        usd, tokens = await self._estimates(user)
        limits: tuple[tuple[Whose, str, int, int], ...] = (
            ("usd:user", usd_user, _micro_limit(self.usd_per_user), usd),
            ("usd:channel", usd_channel, _micro_limit(self.usd_per_channel), usd),
            ("user", user_key, self.per_user, tokens),
            ("channel", channel_key, self.per_channel, tokens),
        )
        return [(whose, Line(key, limit, est)) for whose, key, limit, est in limits if limit > 0]

    async def _estimates(self, user: str) -> tuple[int, int]:
        """What a question holds, in millionths of a dollar and in tokens: the reserve set,
        else the asker's average run today, else (none yet) everything left."""
        usd = micro_usd(self.reserve_usd) if self.reserve_usd else 0
        tokens = self.reserve_tokens
        if usd and tokens:
            return usd, tokens
        user_key, _, _ = self._keys(user, "")
        spent, used, runs = await self.counters.get(
            [self._usd_keys(user, "")[0], user_key, self._runs_key(user)]
        )
        if not runs:
            return usd or ALL_LEFT, tokens or ALL_LEFT
        return usd or -(-spent // runs), tokens or -(-used // runs)

    async def renew(self, hold: Hold, *, lease: float) -> None:
        """Keep ``hold`` another ``lease`` seconds (while its run lives)."""
        if not hold.counters:
            return
        try:
            await self.counters.renew(hold.run, hold.counters, lease=lease)
        except StoreUnavailable as exc:  # it expires by itself; the next beat tries again
            log.warning("hold of run %s not renewed: %s", hold.run, exc)

    async def release(self, hold: Hold) -> None:
        """Drop ``hold`` without counting anything (its question never ran)."""
        if not hold.counters:
            return
        _, ends = self._day()
        try:
            await self.counters.settle(
                hold.run, hold.counters, [0] * len(hold.counters), expire_at=ends
            )
        except StoreUnavailable as exc:  # it expires by itself, one lease later
            log.warning("hold of run %s not released: %s", hold.run, exc)

    async def count(
        self, user: str, channel: str, trace: Trace, *, hold: Hold | None = None
    ) -> None:
        """Adds a finished run's reported tokens, and its cost when its model has a price,
        to the asker's and the channel's day, and drops what the run held: counted even
        without limits, since ``usage`` reports them (it said "0 tokens today" after a run
        when no limit was set)."""
        tokens = run_tokens(trace)
        cost = micro_usd(trace.cost_usd or 0.0)
        user_key, channel_key, ends = self._keys(user, channel)
        usd_user, usd_channel = self._usd_keys(user, channel)
        counters = [user_key, channel_key, usd_user, usd_channel, self._runs_key(user)]
        amounts = [tokens, tokens, cost, cost, 1]
        held = hold.counters if hold is not None else ()
        late = [c for c in held if c not in counters]  # held yesterday, counted today
        run = hold.run if hold is not None else trace.id
        try:
            await self.counters.settle(run, counters, amounts, expire_at=ends)
            if late:
                await self.counters.settle(run, late, [0] * len(late), expire_at=ends)
        except StoreUnavailable as exc:
            log.warning("%d tokens of run %s not counted: %s", tokens, trace.id, exc)

    async def usage(self, user: str, channel: str) -> Usage:
        """Raises ``StoreUnavailable`` (the caller says the count cannot be read now)."""
        keys, ends = self._all_keys(user, channel)
        used, channel_used, spent, channel_spent = await self.counters.get(keys)
        return Usage(
            used,
            self.per_user,
            channel_used,
            self.per_channel,
            ends,
            user_usd=spent / MICRO_USD,
            user_usd_limit=self.usd_per_user,
            channel_usd=channel_spent / MICRO_USD,
            channel_usd_limit=self.usd_per_channel,
        )

    def describe(self, usage: Usage) -> str:
        return usage.describe(self._clock())

    async def report(self, user: str, channel: str, *, admin: bool) -> str:
        """What ``/reactbot usage`` and ``/ask-settings usage`` answer (``UNREADABLE`` while
        the counts cannot be read)."""
        try:
            used = await self.usage(user, channel)
        except StoreUnavailable:
            return UNREADABLE
        text = self.describe(used)
        limited = used.user_limit or used.user_usd_limit
        return text + " (Admins are not limited.)" if admin and limited else text


def run_tokens(trace: Trace) -> int:
    """Every token the run's model calls reported (prompt and completion)."""
    return sum((s.prompt_tokens or 0) + (s.completion_tokens or 0) for s in trace.steps)
