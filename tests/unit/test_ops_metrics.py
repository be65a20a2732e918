"""The metrics observer and the loop-lag sampler, without a server."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry

from bot.app import App
from bot.config import Config
from bot.ops import Metrics
from core.agent import Agent
from core.events import Cancelled, Finished
from core.scripted import ScriptedModel, Turn
from core.tools import FunctionTool


def value(metrics: Metrics, name: str, **labels: str) -> float:
    found = metrics.registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


async def test_loop_lag_records_how_long_the_loop_was_blocked() -> None:
    app = App.create(Config())
    metrics = Metrics(app)
    app.room.start()  # the probe admission reads is the one the metric shows
    await asyncio.sleep(0.25)
    time.sleep(0.3)  # noqa: ASYNC251 - blocking the loop is the point
    await asyncio.sleep(0.25)
    app.room.stop()
    assert value(metrics, "reactbot_event_loop_lag_seconds_count") >= 3
    assert value(metrics, "reactbot_event_loop_lag_seconds_sum") >= 0.15
    assert value(metrics, "reactbot_event_loop_lag_seconds_bucket", le="0.1") >= 2
    assert value(metrics, "reactbot_event_loop_lag_seconds_bucket", le="0.1") < value(
        metrics, "reactbot_event_loop_lag_seconds_count"
    ), "the blocked 0.3 s is one late sample"


async def test_refusals_are_counted_by_platform_and_reason() -> None:
    app = App.create(Config())
    metrics = Metrics(app)
    app.room.refused["discord", "overloaded"] += 2
    app.room.refused["slack", "capacity"] += 1
    assert (
        value(metrics, "reactbot_runs_refused_total", platform="discord", reason="overloaded") == 2
    )
    assert value(metrics, "reactbot_runs_refused_total", platform="slack", reason="capacity") == 1


async def test_each_metrics_object_has_its_own_registry() -> None:
    app = App.create(Config())
    first, second = Metrics(app), Metrics(app, registry=CollectorRegistry())
    assert first.registry is not second.registry  # no clash with the global default either


async def test_a_stopped_run_leaves_nothing_in_flight_and_counts_its_stopped_tool() -> None:
    started = asyncio.Event()

    async def slow(arg: str) -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    app = App.create(Config())
    app.tools.add(FunctionTool("slow", slow, description="waits", example="slow[x]"))
    metrics = Metrics(app)
    model = ScriptedModel([Turn("Thought: wait.\nAction: slow[x]")])
    agent = Agent(model, app.tools, observers=[metrics.observer])
    run = agent.start("wait", conversation="discord:1:2")
    await started.wait()
    assert value(metrics, "reactbot_runs_in_flight", platform="discord") == 1
    run.cancel(by="ada")
    events = [e async for e in run.events()]
    assert isinstance(events[-1], Cancelled)
    assert value(metrics, "reactbot_runs_in_flight", platform="discord") == 0
    assert value(metrics, "reactbot_runs_total", platform="discord", outcome="cancelled") == 1
    assert value(metrics, "reactbot_tool_calls_total", tool="slow", outcome="error") == 1


async def test_a_tool_name_from_the_model_is_no_label() -> None:
    app = App.create(Config())
    metrics = Metrics(app)
    hostile = "everyone_" + "x" * 500
    model = ScriptedModel(
        [f"Thought: try.\nAction: {hostile}[1]", "Thought: ok.\nAction: finish[done]"]
    )
    agent = Agent(model, app.tools, observers=[metrics.observer])
    events = [e async for e in agent.run("q", conversation="slack:C1:1.0")]
    assert isinstance(events[-1], Finished)
    text = metrics.exposition().decode()
    assert "everyone" not in text and "xxxx" not in text
    assert value(metrics, "reactbot_tool_calls_total", tool="unknown", outcome="error") == 1


async def test_a_priced_model_counts_its_cost_and_an_unpriced_one_only_tokens() -> None:
    from core.llm import Usage
    from core.pricing import Price

    app = App.create(Config())
    app.agent.prices["priced"] = Price(input=1.0, output=2.0)
    metrics = Metrics(app)
    for name in ("priced", "free"):
        model = ScriptedModel(
            [Turn("Thought: ok.\nAction: finish[4]", usage=Usage(1000, 500))], model_name=name
        )
        agent = Agent(model, app.tools, observers=[metrics.observer])
        _ = [e async for e in agent.run("2+2?", conversation="slack:C1:1.0")]
    assert value(metrics, "reactbot_model_cost_usd_total", model="priced") == 0.002
    assert value(metrics, "reactbot_model_cost_usd_total", model="free") == 0.0
    assert value(metrics, "reactbot_model_tokens_total", model="free", direction="input") == 1000


async def test_metrics_publish_no_created_series() -> None:
    """prometheus_client's default adds ``*_created`` beside every counter and histogram."""
    app = App.create(Config())
    metrics = Metrics(app)
    model = ScriptedModel(["Thought: ok.\nAction: finish[done]"])
    agent = Agent(model, app.tools, observers=[metrics.observer])
    events = [e async for e in agent.run("q", conversation="slack:C1:1.0")]
    assert isinstance(events[-1], Finished)
    text = metrics.exposition().decode()
    assert "reactbot_runs_total{" in text and "reactbot_run_steps_bucket{" in text
    assert "_created" not in text


async def test_scheduled_runs_are_counted_by_outcome_with_their_lateness() -> None:
    from core.scheduler import RecordingRunner, Scheduler
    from core.schedules import Added, InMemorySchedules, Place, ScheduleBook, ScheduleSettings
    from core.stores import InMemoryEventClaims

    now = [1_800_000_000.0]
    book = ScheduleBook(InMemorySchedules(), ScheduleSettings(min_interval_seconds=60))
    added = await book.add(
        owner="slack:T1:UADA",
        owner_name="@ada",
        place=Place("slack", "C1"),
        when_text="* * * * * UTC",
        question="anything new?",
        admin=True,
        now=now[0],
    )
    assert isinstance(added, Added)
    runner = RecordingRunner(["post_failed"])
    scheduler = Scheduler(
        book=book,
        claims=InMemoryEventClaims(),
        runner=runner,
        notice=runner,
        clock=lambda: now[0],
    )
    metrics = Metrics(App.create(Config()))
    metrics.watch_schedules(scheduler)
    for minute in (1, 2):
        now[0] = added.upcoming[minute - 1] + 4
        await scheduler.tick()
        await scheduler.settled()
    assert value(metrics, "reactbot_schedule_runs_total", outcome="post_failed") == 1
    assert value(metrics, "reactbot_schedule_runs_total", outcome="ok") == 1
    assert value(metrics, "reactbot_schedule_lateness_seconds_count") == 2
    assert value(metrics, "reactbot_schedule_lateness_seconds_sum") == 8
    assert value(metrics, "reactbot_schedule_lateness_seconds_bucket", le="5.0") == 2
