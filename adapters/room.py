"""The process's room for runs, shared by every surface it serves: overload refuses, never fails.

A question is admitted only while this process has room: fewer than
``agent.max_concurrent_runs`` runs going on all its surfaces together, and an event loop that
is on time (its lag, ``core.looplag.LoopLag``, at most ``ops.max_loop_lag``). Otherwise the
asker is told at once, in one polite sentence (``BUSY``), to ask again in a moment, and the
refusal is counted (``refused``: ``reactbot_runs_refused`` on ``/metrics``). The runs already
going keep the loop's time for themselves: that is what keeps their Redis calls, and so their
memory, on time (``core.stores.redis`` waits in the loop's punctual time besides).

Each surface's ``Answering`` takes its room here (``adapters.dispatch.checks``); one made without a
shared room has its own, without the lag check.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

from core.looplag import LoopLag

BUSY = "⏳ I'm answering a lot of questions right now; please ask again in a moment."
MAX_CONCURRENT_RUNS = 500
MAX_LOOP_LAG = 0.25
"""Seconds (``ops.max_loop_lag``); 0 turns the lag check off."""

Full = Literal["capacity", "overloaded"]
"""``capacity``: ``max_concurrent_runs`` are going; ``overloaded``: the loop is late."""


class Room:
    """Runs this process answers at once, across its surfaces, and whether it may take more."""

    def __init__(
        self,
        max_runs: int = MAX_CONCURRENT_RUNS,
        *,
        lag: LoopLag | None = None,
        max_lag: float = MAX_LOOP_LAG,
    ) -> None:
        self.max_runs = max_runs
        self.lag = lag
        """The loop's lateness; None: not checked."""
        self.max_lag = max_lag
        self.taken = 0
        """Runs admitted and not yet ended, on every surface."""
        self.refused: Counter[tuple[str, str]] = Counter()
        """Questions refused since start, by (platform, reason) — every reason, not only
        this room's (``Answering.admit`` counts them here)."""

    def start(self) -> None:
        """Begin watching the loop (the running one); a no-op when already watching."""
        if self.lag is not None:
            self.lag.start()

    def stop(self) -> None:
        if self.lag is not None:
            self.lag.stop()

    def full(self) -> Full | None:
        """Why there is no room for one more run now, or None."""
        if self.taken >= self.max_runs:
            return "capacity"
        if self.lag is not None and self.max_lag > 0 and self.lag.lag() > self.max_lag:
            return "overloaded"
        return None

    def take(self) -> Full | None:
        """Reserve room for one run (None) or say why not; no await, so a burst cannot
        overshoot it. Given back with ``give_back``."""
        why = self.full()
        if why is None:
            self.taken += 1
        return why

    def give_back(self) -> None:
        self.taken -= 1
