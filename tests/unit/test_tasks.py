"""Tasks a surface spawns: a failure is logged and the others go on."""

from __future__ import annotations

import asyncio
import logging

import pytest

from adapters.tasks import Tasks


async def test_a_failing_task_is_logged_and_the_others_finish(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tasks = Tasks("Discord")
    done: list[str] = []
    gate = asyncio.Event()

    async def fails() -> None:
        raise RuntimeError("boom")

    async def waits() -> None:
        await gate.wait()
        done.append("waited")

    tasks.spawn(fails())
    tasks.spawn(waits())
    assert len(tasks) == 2
    await asyncio.sleep(0)  # let the failing one run
    gate.set()
    with caplog.at_level(logging.ERROR):
        await tasks.settled()
    assert done == ["waited"] and not tasks
    assert [r.getMessage() for r in caplog.records] == ["a Discord task failed"]
