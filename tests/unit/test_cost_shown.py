"""A priced model's cost in money where people read a run: the Discord footer (both
layouts), Slack's root footer and streamed totals, each Slack trace step, the trace page
(total and per step). Unpriced: tokens only, as before."""

from __future__ import annotations

from adapters.discord.layout import ComponentsRenderer
from adapters.discord.render import DiscordRenderer
from adapters.live import RunView
from adapters.slack.render import SlackRenderer
from adapters.slack.stream_render import totals_line
from adapters.slack.trace_thread import trace_posts
from bot.web import _environment, render_trace
from core.events import Finished, RunStarted
from core.trace import Trace, TraceStep


def priced(cost: float | None) -> RunView:
    trace = Trace(question="q", answer="42", id="p1", models=["gpt-4o-mini"], status="answered")
    trace.steps = [
        TraceStep(1, thought="t", action="calculate", action_input="6*7", observation="42",
                  prompt_tokens=100, completion_tokens=20,
                  cost_usd=None if cost is None else cost / 2),
        TraceStep(2, thought="done", kind="final", prompt_tokens=60, completion_tokens=20,
                  cost_usd=None if cost is None else cost / 2),
    ]  # fmt: skip
    trace.started_at, trace.ended_at = 1.0, 2.5
    view = RunView()
    view.apply(RunStarted(run_id="p1", question="q", model="gpt-4o-mini", max_steps=8, mode="text"))
    view.apply(Finished(trace=trace, answer="42", status="answered"))
    return view


def test_the_footers_show_the_cost_when_there_is_a_price() -> None:
    view = priced(0.0113)
    assert "$0.011" in DiscordRenderer().final(view).content
    assert "$0.011" in str(ComponentsRenderer().final(view).card)
    assert "$0.011" in str(SlackRenderer(run_id="p1").final(view).blocks)
    assert "$0.011" in totals_line(view)
    assert view.trace is not None
    steps = str([p.blocks for p in trace_posts(view.trace)])
    assert "$0.0057" in steps or "$0.0056" in steps
    page = render_trace(_environment(), view.trace, query="exp=1&sig=" + "a" * 64)
    assert "$0.011" in page and ("$0.0057" in page or "$0.0056" in page)


def test_no_price_no_money() -> None:
    view = priced(None)
    assert view.trace is not None
    for shown in (
        DiscordRenderer().final(view).content,
        str(SlackRenderer(run_id="p1").final(view).blocks),
        totals_line(view),
        render_trace(_environment(), view.trace, query="exp=1&sig=" + "a" * 64),
    ):
        assert "$" not in shown
