"""The platform-neutral live message: state, pacing, coalescing, failures, final state."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from adapters.live import EditDeferred, EditRejected, LiveMessage, RateLimited, RunView
from adapters.pacing import EditPacer
from core.agent import Agent
from core.events import (
    ApprovalRequested,
    Event,
    Finished,
    RunStarted,
    StepStarted,
    ThoughtDelta,
)
from core.scripted import ScriptedModel, Turn
from core.tools import FunctionTool, ToolRegistry
from core.trace import ApprovalRecord, Trace, TraceStep


def tools() -> ToolRegistry:
    async def calculate(arg: str) -> str:
        return "4"

    registry = ToolRegistry()
    registry.add(FunctionTool("calculate", calculate, "Arithmetic.", "calculate[2+2]"))
    return registry


def run_events(*turns: Turn | str) -> AsyncIterator[Event]:
    return Agent(ScriptedModel(list(turns)), tools()).run("What is 2+2?")


class TextRenderer:
    def live(self, view: RunView) -> str:
        current = view.current
        thought = current.thought if current else ""
        return f"{view.phase}|{len(view.steps)}|{thought}|{view.answer}"

    def final(self, view: RunView) -> str:
        return f"FINAL {view.phase}: {view.answer or view.reason}"

    def compact(self, view: RunView) -> str:
        return f"COMPACT {view.phase}"

    def trace_posts(
        self, trace: Trace, *, whole_answer: bool = False, steps: bool = True
    ) -> list[str]:
        head = [f"whole answer: {trace.answer}"] if whole_answer else []
        return head + ([f"step {s.index}" for s in trace.steps] if steps else [])

    def plain(self, text: str) -> str:
        return text


@dataclass
class FakeSurface:
    channel_key: str = "c1"
    edits: list[tuple[float, str]] = field(default_factory=list)
    failures: list[Exception] = field(default_factory=list)
    posted: list[str] = field(default_factory=list)

    async def edit(self, payload: str) -> None:
        if self.failures:
            raise self.failures.pop(0)
        self.edits.append((time.monotonic(), payload))

    async def post_trace(self, trace: Trace, posts: Sequence[str]) -> None:
        self.posted.extend(posts)


async def test_run_view_follows_a_whole_run() -> None:
    view = RunView()
    async for event in run_events(
        "Thought: add\nAction: calculate[2+2]", "Thought: done\nAction: finish[4]"
    ):
        view.apply(event)
        if view.phase == "acting":
            assert view.current is not None and view.current.action == "calculate"
    assert view.phase == "answered" and view.answer == "4" and view.is_final
    assert [s.thought.strip() for s in view.steps] == ["add", "done"]
    assert view.steps[0].observation == "4" and view.steps[0].done
    assert view.trace is not None and view.trace.answer == "4"


async def test_edits_are_coalesced_and_paced_and_the_final_state_arrives() -> None:
    surface = FakeSurface()
    live = LiveMessage(surface, TextRenderer(), EditPacer(0.1))
    slow = Turn("Thought: " + "word " * 40 + "\nAction: finish[4]", chunk_size=3, delay=0.005)
    view = await live.follow(run_events(slow))
    live_times = [t for t, _ in surface.edits[:-1]]
    assert surface.edits[-1][1] == "FINAL answered: 4"
    # live updates keep the channel's spacing; the final state does not wait for it
    assert all(b - a >= 0.1 - 0.01 for a, b in itertools.pairwise(live_times))
    assert 2 <= len(surface.edits) < 15  # ~70 chunks, coalesced into a handful of edits
    assert surface.posted == ["step 1"]
    assert view.phase == "answered"


async def test_a_rate_limit_postpones_the_channel_and_the_final_state_still_arrives() -> None:
    surface = FakeSurface(failures=[RateLimited(0.3)])
    pacer = EditPacer(0.05)
    live = LiveMessage(surface, TextRenderer(), pacer)
    started = time.monotonic()
    await live.follow(run_events("Thought: t\nAction: finish[4]"))
    assert surface.edits[-1][1] == "FINAL answered: 4"
    assert surface.edits[0][0] - started >= 0.3 - 0.02
    assert pacer.rate_limited == 1 and live.stats.rate_limited == 1


async def test_transient_and_unexpected_edit_errors_never_lose_the_final_state() -> None:
    surface = FakeSurface(
        failures=[EditDeferred(0.05), RuntimeError("HTTP 502"), EditDeferred(0.05)]
    )
    live = LiveMessage(surface, TextRenderer(), EditPacer(0.01))
    await live.follow(run_events("Thought: t\nAction: finish[4]"))
    assert surface.edits[-1][1] == "FINAL answered: 4"
    assert live.stats.rate_limited == 0


async def test_an_event_stream_that_ends_early_still_ends_in_a_final_state() -> None:
    async def cut_short() -> AsyncIterator[Event]:
        async for event in run_events(Turn("Thought: hanging", stall_after=1)):
            yield event
            return

    surface = FakeSurface()
    view = await LiveMessage(surface, TextRenderer(), EditPacer(0.01)).follow(cut_short())
    assert view.phase == "failed"
    assert surface.edits[-1][1] == "FINAL failed: The run ended without a result."


class BrokenRenderer(TextRenderer):
    def live(self, view: RunView) -> str:
        raise ValueError("renderer bug")

    def final(self, view: RunView) -> str:
        raise ValueError("renderer bug")

    def compact(self, view: RunView) -> str:
        raise ValueError("renderer bug")

    def plain(self, text: str) -> str:
        return "PLAIN " + text


async def test_a_renderer_bug_still_ends_the_message_in_a_final_state() -> None:
    surface = FakeSurface()
    live = LiveMessage(surface, BrokenRenderer(), EditPacer(0.01))
    await live.follow(run_events("Thought: t\nAction: finish[4]"))
    assert len(surface.edits) == 1
    assert surface.edits[0][1].startswith("PLAIN 4\n\n(reactbot could not format this message")
    assert surface.posted == ["whole answer: 4", "step 1"]


async def test_a_paced_edit_carries_the_state_at_send_time_not_at_wake_time() -> None:
    async def events() -> AsyncIterator[Event]:
        yield RunStarted("r", "q", "m", 8)
        yield StepStarted(1, 8)
        yield ThoughtDelta(1, "x")
        for _ in range(8):
            await asyncio.sleep(0.05)
            yield ThoughtDelta(1, "y")
        async for event in run_events("Thought: t\nAction: finish[4]"):
            if isinstance(event, Finished):
                yield event

    surface = FakeSurface()
    await LiveMessage(surface, TextRenderer(), EditPacer(0.25)).follow(events())
    live_edits = [payload for _, payload in surface.edits if not payload.startswith("FINAL")]
    assert live_edits[0].endswith("|x|")
    # the second edit waited ~0.25 s for its slot; it must show what arrived meanwhile
    assert live_edits[1].count("y") >= 3


async def test_a_refused_final_edit_falls_back_to_compact_then_plain() -> None:
    surface = FakeSurface(failures=[EditRejected("400: content too long")])
    live = LiveMessage(surface, TextRenderer(), EditPacer(0.01))
    await live.follow(run_events("Thought: t\nAction: finish[4]"))
    assert surface.edits[-1][1] == "COMPACT answered"
    assert live.stats.rejected == 1
    assert surface.posted == ["whole answer: 4", "step 1"]  # nothing of the answer is lost

    surface = FakeSurface(failures=[EditRejected("too long"), EditRejected("still too long")])
    live = LiveMessage(surface, TextRenderer(), EditPacer(0.01))
    await live.follow(run_events("Thought: t\nAction: finish[4]"))
    assert surface.edits[-1][1].startswith("4\n\n(reactbot could not format this message")
    assert live.stats.rejected == 2


async def test_a_refused_live_payload_is_not_sent_again() -> None:
    class Same(TextRenderer):
        def live(self, view: RunView) -> str:
            return "same"

    sent: list[str] = []

    @dataclass
    class Refusing(FakeSurface):
        async def edit(self, payload: str) -> None:
            sent.append(payload)
            if payload == "same":
                raise EditRejected("invalid_blocks")
            await super().edit(payload)

    live = LiveMessage(Refusing(), Same(), EditPacer(0.01), tick=0.02)
    slow = Turn("Thought: " + "word " * 20 + "\nAction: finish[4]", chunk_size=3, delay=0.01)
    await live.follow(run_events(slow))
    assert sent.count("same") == 1
    assert sent[-1] == "FINAL answered: 4"


# ---- found in review --------------------------------------------------------------------------


class SlowSurface(FakeSurface):
    """Each edit takes a while; records when each began and ended."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.spans: list[tuple[float, float, str]] = []
        self.cut: list[str] = []

    async def edit(self, payload: str) -> None:
        started = time.monotonic()
        try:
            await asyncio.sleep(self.seconds)
        except asyncio.CancelledError:  # the request was on its way: it may still land
            self.cut.append(payload)
            raise
        self.spans.append((started, time.monotonic(), payload))


async def test_a_live_edit_already_sent_finishes_before_the_final_one_goes() -> None:
    """Cut off, a live edit's request could reach the platform after the final one and put
    the message back to a running state."""
    surface = SlowSurface(0.3)
    turn = Turn("Thought: quick\nAction: finish[4]", chunk_size=4, delay=0.02)
    await LiveMessage(surface, TextRenderer(), EditPacer(0.0)).follow(run_events(turn))
    (*live, final) = surface.spans
    assert final[2] == "FINAL answered: 4"
    assert live and all(end <= final[0] for _, end, _ in live)
    assert surface.cut == []


async def test_a_run_stops_counting_for_the_reserve_once_its_final_is_sent() -> None:
    class Posting(FakeSurface):
        async def post_trace(self, trace: Trace, posts: Sequence[str]) -> None:
            self.running_while_posting = pacer.running

    pacer = EditPacer(0.0)
    surface = Posting()
    await LiveMessage(surface, TextRenderer(), pacer).follow(
        run_events("Thought: t\nAction: finish[4]")
    )
    assert surface.running_while_posting == 0 and pacer.running == 0


async def test_a_request_for_approval_goes_like_a_final() -> None:
    live = LiveMessage(FakeSurface(), TextRenderer(), EditPacer(0.0))
    live.stats.edits = 3
    live.stats.first_text_at = live.stats.first_visible_at = 1.0
    assert live._priority() == "live"
    live.view.pending = ApprovalRequested(1, 0, "save_note", "x", "t", 300.0)
    assert live._priority() == "final"


def test_a_finished_trace_draws_as_its_live_view_ended() -> None:
    trace = Trace(question="delete it?", user="ada", started_at=1.0, ended_at=3.5)
    trace.steps = [
        TraceStep(1, thought="I will delete.", action="delete", action_input="b.txt",
                  observation="deleted", approval=ApprovalRecord("edited", by="bo", input="a.txt")),
        TraceStep(1, action="list", action_input="", call=1, observation="x", error="boom"),
        TraceStep(2, kind="format_error", raw="nonsense"),
        TraceStep(2, kind="final", thought="Done."),
    ]  # fmt: skip
    trace.status, trace.stopped_by = "cancelled", "bo"
    view = RunView.of_trace(trace, verbosity="compact")
    assert (view.phase, view.stopped_by, view.verbosity, view.elapsed()) == (
        "cancelled", "bo", "compact", 2.5,
    )  # fmt: skip
    first, parallel, final = view.steps
    assert first.approval is not None and (first.approval.outcome, first.approval.by) == (
        "edited", "bo",
    )  # fmt: skip
    assert (parallel.call, parallel.error, final.final, final.thought) == (1, True, True, "Done.")
    trace.status, trace.answer = "answered", "It is gone."
    assert (RunView.of_trace(trace).phase, RunView.of_trace(trace).answer) == (
        "answered", "It is gone.",
    )  # fmt: skip
    trace.status, trace.reason = "interrupted", None
    assert RunView.of_trace(trace).phase == "failed"
