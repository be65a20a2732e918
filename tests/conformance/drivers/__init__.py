"""One driver per surface, each over that surface's integration harness."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator

from core.scripted import Turn
from tests.conformance.driver import Driver

PLATFORMS = ("discord", "slack", "telegram", "web")


@contextlib.asynccontextmanager
async def open_driver(
    platform: str, turns: list[Turn | str], *, merge_window: float = 0.0
) -> AsyncIterator[Driver]:
    """The surface ``platform`` served against its fake, its model scripted with ``turns``."""
    module = importlib.import_module(f"tests.conformance.drivers.{platform}")
    async with module.driving(turns, merge_window=merge_window) as driver:
        yield driver
