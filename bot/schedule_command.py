"""``reactbot schedule add|list|pause|resume|delete|run``: the operator's hands on the schedules
every ``serve`` process runs (docs/schedules.md).

The operator is an admin everywhere: ``schedule.who`` does not apply, the limits and the
minimum interval do. Schedules added here are owned by ``operator``. A ``run`` is asked, not
run here: the next serving process to look (within seconds) takes it, once. Without Redis
there is nothing to reach (each ``serve`` keeps its own in memory), so the command says so.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from adapters import words
from core.errors import StoreUnavailable
from core.schedules import Added, Place, Schedule, ScheduleBook, ScheduleSettings

if TYPE_CHECKING:
    from rich.console import Console

    from bot.app import App
    from bot.config import Config

OPERATOR = "operator"


def settings_of(config: Config) -> ScheduleSettings:
    s = config.schedule
    return ScheduleSettings(
        default_timezone=s.default_timezone,
        who=s.who,
        max_per_channel=s.max_per_channel,
        max_per_user=s.max_per_user,
        min_interval_seconds=s.min_interval_seconds,
        catch_up_seconds=s.catch_up_seconds,
        max_question_chars=config.agent.max_question_chars,
    )


def schedule_book(app: App) -> ScheduleBook:
    """The schedules of this deployment: on its Redis, else in this process's memory."""
    from core.schedules import InMemorySchedules

    client = app.redis_client
    if client is None:
        return ScheduleBook(InMemorySchedules(), settings_of(app.config))
    from core.stores.redis.schedules import RedisSchedules

    store = RedisSchedules(client, prefix=app.config.redis.prefix)
    return ScheduleBook(store, settings_of(app.config))


async def schedule_command(
    app: App,
    args: argparse.Namespace,
    console: Console,
    errors: Console,
    *,
    clock: Callable[[], float] = time.time,
) -> int:
    if args.schedule_command is None:
        console.print(args.schedule_help(), markup=False, end="")
        return 0
    if app.redis_client is None:
        errors.print(words.SCHEDULES_NEED_REDIS, style="red", markup=False)
        return 1
    book = schedule_book(app)
    try:
        return await _act(book, args, console, errors, now=clock())
    except StoreUnavailable as exc:
        errors.print(str(exc), style="red", markup=False)
        return 1


async def _act(
    book: ScheduleBook, args: argparse.Namespace, console: Console, errors: Console, *, now: float
) -> int:
    from adapters.terminal.render import printable

    command: str = args.schedule_command
    if command == "add":
        added = await book.add(
            owner=OPERATOR,
            owner_name=OPERATOR,
            place=Place(args.platform, args.channel, args.thread),
            when_text=args.when,
            question=" ".join(args.question),
            admin=True,
            now=now,
        )
        if not isinstance(added, Added):
            errors.print(printable(words.schedule_refused(added)), style="red", markup=False)
            return 1
        console.print(printable(words.schedule_added(added.schedule, added.upcoming)), markup=False)
        return 0
    if command == "list":
        place = Place(args.platform, args.channel, args.thread) if args.channel else None
        listed = await book.listing(place)
        if args.platform and not args.channel:
            listed = [s for s in listed if s.place.platform == args.platform]
        for schedule in listed:
            where = _where(schedule.place)
            console.print(printable(f"{words.schedule_line(schedule)} · {where}"), markup=False)
        if not listed:
            console.print("No schedules.", markup=False)
        return 0
    changed = await _change(book, command, args.schedule_id, now=now)
    if changed is None:
        errors.print(printable(words.schedule_missing(args.schedule_id)), style="red", markup=False)
        return 1
    what = {"pause": "paused", "resume": "resumed", "delete": "deleted", "run": "run"}[command]
    console.print(printable(words.schedule_changed(changed, what)), markup=False)  # type: ignore[arg-type]
    return 0


async def _change(
    book: ScheduleBook, command: str, schedule_id: str, *, now: float
) -> Schedule | None:
    if command == "pause":
        return await book.pause(schedule_id)
    if command == "resume":
        return await book.resume(schedule_id, now=now)
    if command == "delete":
        return await book.delete(schedule_id)
    return await book.run_now(schedule_id, now=now)


def _where(place: Place) -> str:
    thread = f" thread {place.thread}" if place.thread else ""
    return f"{place.platform} {place.channel}{thread}"
