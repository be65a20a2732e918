"""One driver per surface, each over that surface's integration harness."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator

from core.scripted import Turn
from tests.conformance.driver import Driver

PLATFORMS = ("discord", "slack", "telegram", "web", "fifth")
ACT = "<the surface's action that needs approval>"


@contextlib.asynccontextmanager
async def open_driver(
    platform: str,
    turns: list[Turn | str],
    *,
    merge_window: float = 0.0,
    approval: bool = False,
    lease: float | None = None,
    room: int | None = None,
    elsewhere: bool = False,
) -> AsyncIterator[Driver]:
    """The surface ``platform`` served against its fake, its model scripted with ``turns``
    (``ACT`` in them: the surface's own action that needs a person's approval, with
    ``approval``: a bot whose broker asks for it); ``lease``: the runs' lease, which is
    also how long a dead process's run waits before the sweep finishes it; ``room``: the
    process's room (``agent.max_concurrent_runs``), else the default; ``elsewhere``: the
    bot is enabled only in a place other than the one the driver asks in (its access list
    names another channel or chat)."""
    module = importlib.import_module(f"tests.conformance.drivers.{platform}")
    script = [module.ACT if turn == ACT else turn for turn in turns]
    async with module.driving(
        script,
        merge_window=merge_window,
        approval=approval,
        lease=lease,
        room=room,
        elsewhere=elsewhere,
    ) as driver:
        yield driver
