"""What a model call costs in money, from the usage the model reports and its price.

A price is in US dollars per million tokens: ``input`` (prompt), ``output`` (completion) and,
optionally, ``cached_input`` for prompt tokens the provider served from its cache (without it,
cached tokens cost ``input``). A model without a price has no cost: runs show tokens only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.llm import Usage

PER = 1_000_000
"""Prices are per million tokens."""
MICRO_USD = 1_000_000
"""Spending is counted in millionths of a dollar (integer counters, like token counts)."""


@dataclass(frozen=True, slots=True)
class Price:
    input: float
    output: float
    cached_input: float | None = None

    def cost(self, usage: Usage) -> float:
        """US dollars for one model call's ``usage``."""
        cached = min(max(usage.cached_tokens, 0), usage.prompt_tokens)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        fresh = usage.prompt_tokens - cached
        total = fresh * self.input + cached * cached_rate + usage.completion_tokens * self.output
        return total / PER


def micro_usd(usd: float) -> int:
    """``usd`` in whole millionths of a dollar, rounded up: a spend never counts as free."""
    micros = usd * MICRO_USD
    whole = int(micros)
    return whole + 1 if micros > whole else whole


def format_usd(usd: float) -> str:
    """``$0.0004``, ``$0.011``, ``$1.42``: enough digits that a small run is not ``$0.00``."""
    if usd <= 0:
        return "$0"
    if usd >= 1:
        return f"${usd:,.2f}"
    if usd >= 0.01:  # $0.011, $0.05 (not $0.050)
        shown = f"{usd:.3f}"
        return "$" + (shown[:-1] if shown.endswith("0") else shown)
    # two significant digits, at least four decimals: $0.0004, $0.00012, $0.0000003
    decimals = min(10, max(4, 1 - math.floor(math.log10(usd))))
    return f"${usd:.{decimals}f}".rstrip("0").rstrip(".")
