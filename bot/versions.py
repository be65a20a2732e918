"""The libraries whose private API reactbot reaches into, and the ranges it is tested with.

Each range is pyproject.toml's (a test keeps the two the same): from the oldest version the
code was written against to the next major version, which is untested by definition. At
start-up, one warning line per library found outside its range names the library, the
version and the range. docs/development.md lists every private symbol used and the test in
tests/unit/test_internals.py that fails when a release moves it.
"""

from __future__ import annotations

import logging
import re

__all__ = ["GUARDED", "outside_range", "warn_outside_ranges"]

log = logging.getLogger(__name__)

GUARDED: dict[str, str] = {
    "redis": ">=8.1,<9",
    "discord.py": ">=2.5,<3",
    "slack-bolt": ">=1.21,<2",
    "slack_sdk": ">=3.37,<4",
    "aiohttp": ">=3.10,<4",
    "mcp": ">=2.3,<3",
    "python-telegram-bot": ">=21,<23",
    "openai": ">=3.51,<4",
}
"""Distribution name -> its range, written as in pyproject.toml (only ``>=`` and ``<``)."""


def _release(version: str) -> tuple[int, ...]:
    """The leading numbers of a version (``8.2.0rc1`` -> (8, 2, 0))."""
    numbers = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(n) for n in numbers.group().split(".")) if numbers else ()


def outside_range(name: str, version: str, spec: str) -> str | None:
    """The warning for ``version`` of ``name`` outside ``spec``; None inside it."""
    found = _release(version)
    for clause in spec.split(","):
        bound = _release(clause.lstrip("<>="))
        if (clause.startswith(">=") and found < bound) or (
            clause.startswith("<") and found >= bound
        ):
            return f"{name} {version} is outside the range reactbot is tested with ({spec})"
    return None


def warn_outside_ranges() -> None:
    """One warning line for each guarded library installed outside its range."""
    from importlib import metadata  # here: importing it costs `ask` what it never uses

    for name, spec in GUARDED.items():
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        problem = outside_range(name, version, spec)
        if problem:
            log.warning("%s: parts of it reactbot relies on may have moved", problem)
