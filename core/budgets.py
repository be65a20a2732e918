"""Daily token budgets: one person (or one channel) cannot spend everyone's model budget.

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

    def describe(self, now: float) -> str:
        mine = f"{self.user_tokens:,} tokens"
        if self.user_limit:
            mine += f" of your {self.user_limit:,} for today"
        else:
            mine += " today (no daily limit for you)"
        line = f"You have used {mine}."
        if self.channel_limit:
            line += f" This channel: {self.channel_tokens:,} of {self.channel_limit:,}."
        return f"{line} Counts reset {_reset_phrase(self.resets_at, now)}."


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
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.counters = counters
        self.per_user = per_user
        self.per_channel = per_channel
        self._clock = clock

    @property
    def enabled(self) -> bool:
        return self.per_user > 0 or self.per_channel > 0

    def _day(self) -> tuple[str, float]:
        """Today's UTC date and when it ends (epoch seconds)."""
        today = dt.datetime.fromtimestamp(self._clock(), dt.UTC).date()
        end = dt.datetime.combine(today + dt.timedelta(days=1), dt.time(), dt.UTC)
        return today.isoformat(), end.timestamp()

    def _keys(self, user: str, channel: str) -> tuple[str, str, float]:
        day, ends = self._day()
        return f"{day}:user:{user}", f"{day}:channel:{channel}", ends

    async def refusal(self, user: str, channel: str, *, exempt: bool = False) -> str | None:
        """The one line that says why this question is not answered today, or None."""
        if exempt or not self.enabled:
            return None
        user_key, channel_key, ends = self._keys(user, channel)
        try:
            used, channel_used = await self.counters.get([user_key, channel_key])
        except StoreUnavailable as exc:
            log.warning("token budgets not checked: %s", exc)
            return None
        when = _reset_phrase(ends, self._clock())
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
        """Adds a finished run's reported tokens to the asker's and the channel's day."""
        tokens = run_tokens(trace)
        if tokens <= 0 or not self.enabled:
            return
        user_key, channel_key, ends = self._keys(user, channel)
        try:
            await self.counters.add(user_key, tokens, expire_at=ends)
            await self.counters.add(channel_key, tokens, expire_at=ends)
        except StoreUnavailable as exc:
            log.warning("%d tokens of run %s not counted: %s", tokens, trace.id, exc)

    async def usage(self, user: str, channel: str) -> Usage:
        """Raises ``StoreUnavailable`` (the caller says the count cannot be read now)."""
        user_key, channel_key, ends = self._keys(user, channel)
        used, channel_used = await self.counters.get([user_key, channel_key])
        return Usage(used, self.per_user, channel_used, self.per_channel, ends)

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
        return text + " (Admins are not limited.)" if admin and used.user_limit else text


def run_tokens(trace: Trace) -> int:
    """Every token the run's model calls reported (prompt and completion)."""
    return sum((s.prompt_tokens or 0) + (s.completion_tokens or 0) for s in trace.steps)
