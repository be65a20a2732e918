"""Scheduled questions while ``serve`` runs (issue 44): in every process, one ``Scheduler``
for the platforms it serves, the shared Runner (``adapters.scheduled``) that each surface
gives its port to as it starts, and the chat commands' desk (``adapters.dispatch.schedule``).

Schedules live on the deployment's Redis, or (without it) in this process's memory, and
``serve`` says they will not survive a restart. ``REACTBOT_TEST_SCHEDULE_CLOCK``
(``ORIGIN:SCALE``, for tests only) runs schedule time ``SCALE`` times faster than real time
from the epoch second ``ORIGIN``, as ``bench/schedules.py`` does: processes given the same
value agree on every minute, and the looks scale with it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING

from adapters import words
from adapters.dispatch.schedule import ScheduleDesk
from adapters.scheduled import Joining, ScheduledRuns
from adapters.tasks import alongside
from bot.schedule_command import schedule_book
from core.schedule_tool import ScheduleTool
from core.scheduler import Scheduler

if TYPE_CHECKING:
    from bot.app import App
    from bot.ops import Metrics

log = logging.getLogger(__name__)

TEST_CLOCK_ENV = "REACTBOT_TEST_SCHEDULE_CLOCK"
LOOK_EVERY = 5.0
JITTER = 2.0


class Scheduling:
    """The process's scheduled questions: the book, the runner the surfaces join, the
    commands' desk and the scheduler."""

    def __init__(self, app: App, *, env: Mapping[str, str] = os.environ) -> None:
        clock, scale = test_clock(env.get(TEST_CLOCK_ENV, ""))
        self.book = schedule_book(app)
        self.runs = ScheduledRuns()
        """Each surface adds its port here as it starts (``ScheduledRuns.add``)."""
        self.desk = ScheduleDesk(self.book, clock=clock)
        self.tool = ScheduleTool(
            self.book,
            say_added=words.schedule_added,
            say_refused=words.schedule_refused,
            clock=clock,
        )
        """The ``schedule`` tool, in the app's tools while schedules run: each question's run
        gets it bound to its asker and place (``adapters.dispatch.handlers.ask.proposing``),
        always behind the asker's approval."""
        self.scheduler = Scheduler(
            book=self.book,
            claims=app.stores.claims,
            runner=self.runs,
            notice=self.runs,
            clock=clock,
            every=LOOK_EVERY / scale,
            jitter=JITTER / scale,
            serves=self.runs.serves,
        )


def test_clock(value: str) -> tuple[Callable[[], float], float]:
    """``ORIGIN:SCALE`` -> a clock running ``SCALE`` times faster from ``ORIGIN``, and the
    scale; real time for anything else."""
    origin_text, _, scale_text = value.partition(":")
    try:
        origin, scale = float(origin_text), float(scale_text)
    except ValueError:
        return time.time, 1.0
    if scale <= 0:
        return time.time, 1.0
    return (lambda: origin + (time.time() - origin) * scale), scale


@contextlib.asynccontextmanager
async def running_schedules(app: App, metrics: Metrics | None) -> AsyncIterator[Scheduling]:
    """Schedules looked for while the block runs (the surfaces join ``app.scheduling``);
    the runs still going are cancelled at the end (their messages end as stopped first,
    with the surfaces' shutdown)."""
    scheduling = Scheduling(app)
    app.scheduling = Joining(scheduling.runs, scheduling.desk)
    app.tools.add(scheduling.tool)
    if metrics is not None:
        metrics.watch_schedules(scheduling.scheduler)
    try:
        async with alongside(scheduling.scheduler.forever(), name="schedules"):
            yield scheduling
    finally:
        await scheduling.scheduler.aclose()
        app.tools.remove(scheduling.tool.name)
        app.scheduling = None
