"""The tasks a surface spawns for its answers: owned, and guarded so none fails unseen."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Coroutine
from typing import Any

log = logging.getLogger(__name__)


class Tasks:
    """Every task one surface started and that is not done yet (strong references, so none is
    collected mid-run); a failure is logged with ``what`` and never stops the others."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(self._guarded(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _guarded(self, work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:  # one question's failure must not go unseen, nor stop the others
            log.exception("a %s task failed", self._what)

    def __len__(self) -> int:
        return len(self._tasks)

    def pending(self) -> set[asyncio.Task[None]]:
        return set(self._tasks)

    async def settled(self) -> None:
        """Return once every task spawned so far, and those they spawned, is done."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))


@contextlib.asynccontextmanager
async def alongside(work: Coroutine[Any, Any, object], *, name: str) -> AsyncIterator[None]:
    """``work`` in a task of its own while the block runs, cancelled and waited for when the
    block ends (however it ends)."""
    task = asyncio.create_task(work, name=name)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
