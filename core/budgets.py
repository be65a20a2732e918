"""Daily token and dollar budgets: one person (or one channel) cannot spend everyone's model
budget.

Dollars are counted like tokens, in whole millionths of a dollar (``core.pricing``), from the
cost of a run's steps (known when its model has a ``price``); a run without a price costs
nothing here, and only its tokens count.

A run's tokens are the usage its model reported (prompt + completion, every call of the run),
counted when the run ends, per UTC day, in ``UsageCounters`` that every replica shares
(Redis) or in memory. A question is refused before any model call once the asker's or the
channel's count for the day has reached its limit; admins are exempt. The count is checked
before a run and added after it, so one run may take a budget past its limit: the next one
is refused.

When the counters cannot be reached, questions are answered (a budget outage must not take
the bot down with it) and the tokens of that run go uncounted; both are logged.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from core.errors import StoreUnavailable
from core.pricing import MICRO_USD, format_usd, micro_usd
from core.trace import Trace

log = logging.getLogger(__name__)

UNREADABLE = "I cannot read the counts right now: the shared store is unavailable."


class UsageCounters(Protocol):
    """Integer counters that vanish at a given time (the end of their day)."""

    async def add(self, key: str, amount: int, *, expire_at: float) -> int:
        """Adds ``amount`` and returns the new count, atomically."""
        ...

    async def get(self, keys: Sequence[str]) -> list[int]:
        """The counts (0 for a counter never added to or expired)."""
        ...


class InMemoryUsageCounters:
    """``UsageCounters`` of one process (no Redis)."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._counts: dict[str, tuple[int, float]] = {}
        self._clock = clock

    async def add(self, key: str, amount: int, *, expire_at: float) -> int:
        now = self._clock()
        self._counts = {k: v for k, v in self._counts.items() if v[1] > now}  # days gone
        count = self._counts.get(key, (0, expire_at))[0] + amount
        self._counts[key] = (count, expire_at)
        return count

    async def get(self, keys: Sequence[str]) -> list[int]:
        now = self._clock()
        found = [self._counts.get(key) for key in keys]
        return [entry[0] if entry is not None and entry[1] > now else 0 for entry in found]


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


class TokenBudgets:
    """Daily limits per user and per channel (0: no limit) over shared counters."""

    def __init__(
        self,
        counters: UsageCounters,
        *,
        per_user: int = 0,
        per_channel: int = 0,
        usd_per_user: float = 0.0,
        usd_per_channel: float = 0.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.counters = counters
        self.per_user = per_user
        self.per_channel = per_channel
        self.usd_per_user = usd_per_user
        self.usd_per_channel = usd_per_channel
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

    def _all_keys(self, user: str, channel: str) -> tuple[list[str], float]:
        user_key, channel_key, ends = self._keys(user, channel)
        return [user_key, channel_key, *self._usd_keys(user, channel)], ends

    async def refusal(self, user: str, channel: str, *, exempt: bool = False) -> str | None:
        """The one line that says why this question is not answered today, or None."""
        if exempt or not self.enabled:
            return None
        keys, ends = self._all_keys(user, channel)
        try:
            used, channel_used, spent, channel_spent = await self.counters.get(keys)
        except StoreUnavailable as exc:
            log.warning("token budgets not checked: %s", exc)
            return None
        when = _reset_phrase(ends, self._clock())
        if self.usd_per_user and spent >= micro_usd(self.usd_per_user):
            return (
                f"You have spent your {format_usd(self.usd_per_user)} for today; "
                f"ask again after the reset {when}."
            )
        if self.usd_per_channel and channel_spent >= micro_usd(self.usd_per_channel):
            return (
                f"This channel has spent its {format_usd(self.usd_per_channel)} for today; "
                f"ask again after the reset {when}."
            )
        return self._token_refusal(used, channel_used, when)

    def _token_refusal(self, used: int, channel_used: int, when: str) -> str | None:
        if self.per_user and used >= self.per_user:
            return (
                f"You have used your {self.per_user:,} tokens for today; "
                f"ask again after the reset {when}."
            )
        if self.per_channel and channel_used >= self.per_channel:
            return (
                f"This channel has used its {self.per_channel:,} tokens for today; "
                f"ask again after the reset {when}."
            )
        return None

    async def count(self, user: str, channel: str, trace: Trace) -> None:
        """Adds a finished run's reported tokens, and its cost when its model has a price,
        to the asker's and the channel's day: counted even without limits, since ``usage``
        reports them (it said "0 tokens today" after a run when no limit was set)."""
        tokens = run_tokens(trace)
        cost = micro_usd(trace.cost_usd or 0.0)
        user_key, channel_key, ends = self._keys(user, channel)
        usd_user, usd_channel = self._usd_keys(user, channel)
        try:
            for key, amount in (
                (user_key, tokens),
                (channel_key, tokens),
                (usd_user, cost),
                (usd_channel, cost),
            ):
                if amount > 0:
                    await self.counters.add(key, amount, expire_at=ends)
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
