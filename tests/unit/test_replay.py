"""``core.replay``: the registry that answers recorded tool calls, a replay run end to end
on the scripted model, and the diff of two traces (with hostile and huge text)."""

from __future__ import annotations

import asyncio
import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console

from bot.trace_commands import render_diff
from core import prompt
from core.acting import REPEAT_NOTE
from core.agent import Agent, AgentSettings
from core.errors import ToolError
from core.events import Cancelled, Finished
from core.replay import (
    MAX_ROWS,
    ReplayingTools,
    call_key,
    diff_traces,
    finish_replay,
    normalise_input,
    recorded_calls,
    start_replay,
)
from core.scripted import ScriptedModel, Turn
from core.tools import FunctionTool, ToolHints, ToolRegistry, ToolResult
from core.trace import ApprovalRecord, Trace, TraceStep
from tests.hostile import hostile_text
from tests.properties import property_settings

PROPERTY = property_settings(200)


class Counter:
    """Tools that count how often they really ran."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, str]] = []

    def registry(self, *, approval: bool | None = None) -> ToolRegistry:
        async def calculate(arg: str) -> str:
            self.ran.append(("calculate", arg))
            return "live " + arg

        async def search(arg: str) -> ToolResult:
            self.ran.append(("search", arg))
            return ToolResult("live results", ("https://live.example",))

        async def convert(amount: float, unit: str) -> str:
            self.ran.append(("convert", f"{amount} {unit}"))
            return f"{amount} {unit} converted live"

        registry = ToolRegistry()
        registry.add(FunctionTool("calculate", calculate, "Arithmetic.", "calculate[1+1]"))
        registry.add(
            FunctionTool(
                "search", search, "Web search.", "search[x]", hints=ToolHints(read_only=True)
            )
        )
        registry.add(
            FunctionTool(
                "convert",
                convert,
                "Units.",
                'convert[{"amount": 1, "unit": "km"}]',
                parameters={
                    "type": "object",
                    "properties": {"amount": {"type": "number"}, "unit": {"type": "string"}},
                    "required": ["amount", "unit"],
                },
                approval=approval,
            )
        )
        return registry


def original_trace() -> Trace:
    return Trace(
        question="What is 6*7, and the news?",
        id="orig00000001",
        models=["old-model"],
        steps=[
            TraceStep(
                1, thought="Arithmetic.", action="calculate", action_input="6*7", observation="42"
            ),
            TraceStep(
                2,
                thought="Now the news.",
                action="search",
                action_input="news  today",
                observation="1. Headline",
                sources=["https://news.example/a"],
            ),
            TraceStep(
                3,
                action="calculate",
                action_input="1/0",
                observation="Error: division by zero",
                error="Error: division by zero",
            ),
            TraceStep(
                4,
                action="convert",
                action_input='{"unit": "km", "amount": 3}',
                observation="3 km is 1.86 miles",
            ),
            TraceStep(
                5,
                action="calculate",
                action_input="6*7",
                observation=REPEAT_NOTE + "42",
            ),
            TraceStep(
                6,
                action="search",
                action_input="secret",
                observation="The user denied this action.",
                error="The user denied this action.",
                approval=ApprovalRecord("denied", by="ada"),
            ),
            TraceStep(7, thought="Done."),
        ],
        answer="42; the news is a headline.",
        status="answered",
    )


# ---- normalising and recording ----------------------------------------------------------


def test_inputs_are_compared_normalised() -> None:
    assert normalise_input('{"b": 1,  "a": [1, 2]}') == normalise_input('{"a":[1,2],"b":1}')
    assert normalise_input("  news \n today ") == "news today"
    assert normalise_input("6*7") != normalise_input("6 * 7")  # a space can matter
    assert normalise_input("{not json") == "{not json"
    deep = "[" * 100_000
    assert normalise_input(deep) == deep  # too deep to parse: compared as text, no crash
    assert call_key(" Calculate ", "6*7") == ("calculate", "6*7")


def test_recorded_calls_skip_denied_actions_and_the_agents_own_notes() -> None:
    calls = recorded_calls(original_trace())
    assert [c.text for c in calls[("calculate", "6*7")]] == ["42", "42"]
    assert ("search", "secret") not in calls  # denied: the tool never ran
    assert calls[("convert", '{"amount":3,"unit":"km"}')][0].text == "3 km is 1.86 miles"


def test_a_call_a_person_edited_is_recorded_as_it_ran_without_the_agents_note() -> None:
    step = TraceStep(
        1,
        action="calculate",
        action_input="2+2",
        observation="Note: a person edited the input before it ran; it ran as calculate[2+2].\n4",
        approval=ApprovalRecord("edited", by="ada", input="2+3"),
    )
    calls = recorded_calls(Trace(question="q", steps=[step]))
    assert [c.text for c in calls[("calculate", "2+2")]] == ["4"]
    assert ("calculate", "2+3") not in calls


# ---- the replaying registry -------------------------------------------------------------


async def test_recorded_calls_are_answered_from_the_trace_without_running_the_tool() -> None:
    counter = Counter()
    replaying = ReplayingTools(counter.registry(), original_trace())
    tools = replaying.registry
    calc, search, convert = tools.get("calculate"), tools.get("search"), tools.get("convert")
    assert calc is not None and search is not None and convert is not None
    assert await calc.run(" 6*7 ") == ToolResult("42")
    result = await search.run("news today")
    assert isinstance(result, ToolResult)
    assert result.text == "1. Headline" and result.sources == ("https://news.example/a",)
    assert await convert.run('{"amount": 3, "unit": "km"}') == ToolResult("3 km is 1.86 miles")
    with pytest.raises(ToolError, match=r"^division by zero$"):
        await calc.run("1/0")
    assert counter.ran == []
    assert replaying.replayed == {
        ("calculate", "6*7"),
        ("search", "news today"),
        ("convert", '{"amount":3,"unit":"km"}'),
        ("calculate", "1/0"),
    }


async def test_the_registry_looks_like_the_original_to_the_model() -> None:
    registry = Counter().registry()
    wrapped = ReplayingTools(registry, original_trace()).registry
    assert wrapped.names == registry.names
    for tool in registry:
        twin = wrapped.get(tool.name)
        assert twin is not None
        assert (twin.description, twin.example) == (tool.description, tool.example)
        assert getattr(twin, "parameters", None) == getattr(tool, "parameters", None)


async def test_an_unrecorded_call_stops_unless_live_tools_are_on() -> None:
    counter = Counter()
    off = ReplayingTools(counter.registry(), original_trace())
    calc = off.registry.get("calculate")
    assert calc is not None
    with pytest.raises(ToolError, match="no such call, and live tools are off"):
        await calc.run("2+2")  # not bound to a run: the reason becomes the Observation
    assert off.stopped is not None and off.stopped.why == "not_recorded"
    assert counter.ran == []

    on = ReplayingTools(counter.registry(), original_trace(), live=True)
    calc = on.registry.get("calculate")
    assert calc is not None
    assert await calc.run("2+2") == "live 2+2"
    assert counter.ran == [("calculate", "2+2")] and on.ran_live == {("calculate", "2+2")}


async def test_a_live_call_that_needs_approval_stops_the_replay() -> None:
    counter = Counter()
    replaying = ReplayingTools(counter.registry(approval=True), original_trace(), live=True)
    convert = replaying.registry.get("convert")
    assert convert is not None
    assert await convert.run('{"amount": 3, "unit": "km"}') == ToolResult("3 km is 1.86 miles")
    with pytest.raises(ToolError, match="needs a person's approval"):
        await convert.run('{"amount": 5, "unit": "km"}')
    assert counter.ran == []


# ---- a replay run -----------------------------------------------------------------------


def _agent(model: ScriptedModel, replaying: ReplayingTools, **settings: object) -> Agent:
    return Agent(model, replaying.registry, settings=AgentSettings(**settings))  # type: ignore[arg-type]


async def test_a_replay_answers_recorded_calls_and_links_to_the_original() -> None:
    counter = Counter()
    original = original_trace()
    replaying = ReplayingTools(counter.registry(), original)
    model = ScriptedModel(
        [
            "Thought: multiply\nAction: calculate[ 6*7 ]",
            "Thought: headlines\nAction: search[news today]",
            "Thought: done\nAction: finish[42, and a headline.]",
        ],
        model_name="new-model",
    )
    run = start_replay(_agent(model, replaying), original, replaying)
    final = await run.wait()
    assert isinstance(final, Finished)
    trace = finish_replay(final.trace, replaying)
    assert counter.ran == []
    assert trace.replay_of == original.id and trace.models == ["new-model"]
    assert [(s.action, s.observation, s.replayed) for s in trace.steps] == [
        ("calculate", "42", True),
        ("search", "1. Headline", True),
        (None, None, False),
    ]
    assert trace.steps[1].sources == ["https://news.example/a"]
    assert "**Observation (replayed):**" in trace.to_markdown()
    assert "**Replay of:** orig00000001" in trace.to_markdown()
    assert model.calls[1].messages[-1]["content"].startswith("Observation: <observation>\n42")


async def test_a_replay_stops_at_an_unrecorded_call_with_a_clear_final_state() -> None:
    counter = Counter()
    original = original_trace()
    replaying = ReplayingTools(counter.registry(), original)
    model = ScriptedModel(["Thought: multiply\nAction: calculate[7*6]"])
    run = start_replay(_agent(model, replaying), original, replaying, mode="text")
    events = [event async for event in run.events()]
    final = events[-1]
    assert isinstance(final, Cancelled) and final.by == "the replay"
    trace = finish_replay(final.trace, replaying)
    assert trace.status == "cancelled"
    assert trace.reason is not None and "calculate[7*6]" in trace.reason
    assert "original run made no such call" in trace.reason
    assert trace.steps[0].error == trace.reason and trace.steps[0].observation is None
    assert counter.ran == []


async def test_a_replay_in_tools_mode_matches_calls_made_in_text_mode() -> None:
    counter = Counter()
    original = original_trace()
    replaying = ReplayingTools(counter.registry(), original)
    model = ScriptedModel(
        [
            Turn(
                "Two things.",
                tool_calls=(
                    ("calculate", '{"input": "6*7"}'),
                    ("convert", '{"amount": 3, "unit": "km"}'),
                ),
            ),
            "Both done.",
        ]
    )
    run = start_replay(_agent(model, replaying), original, replaying, mode="tools")
    final = await run.wait()
    assert isinstance(final, Finished), final
    trace = finish_replay(final.trace, replaying)
    assert trace.mode == "tools"
    assert [s.observation for s in trace.steps if s.action] == ["42", "3 km is 1.86 miles"]
    assert all(s.replayed for s in trace.steps if s.action)
    assert counter.ran == []


async def test_an_unrecorded_parallel_call_stops_the_whole_reply() -> None:
    counter = Counter()
    original = original_trace()
    replaying = ReplayingTools(counter.registry(), original)
    model = ScriptedModel(
        [
            Turn(
                "Two things.",
                tool_calls=(("calculate", '{"input": "6*7"}'), ("calculate", '{"input": "9*9"}')),
            )
        ]
    )
    run = start_replay(_agent(model, replaying), original, replaying, mode="tools")
    async with asyncio.timeout(5):  # the stop must not wait on anything
        final = await run.wait()
    assert isinstance(final, Cancelled)
    trace = finish_replay(final.trace, replaying)
    assert trace.reason is not None and "calculate[9*9]" in trace.reason
    assert [s.error == trace.reason for s in trace.steps] == [False, True]
    assert counter.ran == []
    model.assert_complete()


async def test_a_custom_system_prompt_replaces_the_built_in_one_and_is_kept() -> None:
    original = original_trace()
    replaying = ReplayingTools(Counter().registry(), original)
    model = ScriptedModel(["Thought: easy\nAction: finish[42]"])
    template = "Be terse. Tools:\n{tools}\nUse the ReAct format."
    run = start_replay(_agent(model, replaying, system_prompt=template), original, replaying)
    final = await run.wait()
    system = model.calls[0].messages[0]
    assert system["role"] == "system"
    assert system["content"].startswith("Be terse. Tools:\n- calculate: Arithmetic.")
    assert "{tools}" not in system["content"]
    assert final.trace.system_prompt == template


async def test_a_replay_keeps_the_channel_persona_the_original_ran_with() -> None:
    """A trace asked in a channel with a persona is replayed with that persona (below the
    core instructions, as it ran), so the comparison changes only what the replay asked for."""
    original = original_trace()
    original.persona = "Answer like a pirate."
    replaying = ReplayingTools(Counter().registry(), original)
    model = ScriptedModel(["Thought: easy\nAction: finish[42]"])
    run = start_replay(_agent(model, replaying), original, replaying)
    final = await run.wait()
    system = model.calls[0].messages[0]["content"]
    assert system.endswith(prompt.persona_section("Answer like a pirate."))
    assert final.trace.persona == "Answer like a pirate."
    plain = ReplayingTools(Counter().registry(), original_trace())
    model = ScriptedModel(["Thought: easy\nAction: finish[42]"])
    final = await start_replay(_agent(model, plain), plain.original, plain).wait()
    assert (
        final.trace.persona == ""
        and prompt.PERSONA_OPEN not in model.calls[0].messages[0]["content"]
    )


def test_new_fields_round_trip_and_old_traces_still_load() -> None:
    trace = original_trace()
    trace.replay_of, trace.system_prompt = "abc", "custom {tools}"
    trace.steps[0].replayed = True
    loaded = Trace.from_json(trace.to_json())
    assert loaded.replay_of == "abc" and loaded.system_prompt == "custom {tools}"
    assert loaded.steps[0].replayed and not loaded.steps[1].replayed
    old = trace.to_dict()
    del old["replay_of"], old["system_prompt"]
    for step in old["steps"]:
        del step["replayed"]
    legacy = Trace.from_json(json.dumps(old))
    assert legacy.replay_of is None and legacy.system_prompt is None
    assert not any(s.replayed for s in legacy.steps)


# ---- the diff ---------------------------------------------------------------------------


def test_the_same_trace_has_no_difference() -> None:
    diff = diff_traces(original_trace(), original_trace())
    assert diff.first is None and not any(row.differs for row in diff.rows)
    assert [row.label for row in diff.rows] == ["1", "2", "3", "4", "5", "6", "7", "answer"]
    assert diff.summary() == "The two runs took the same steps and gave the same answer."


def test_the_first_row_that_acts_differently_is_marked() -> None:
    left, right = original_trace(), original_trace()
    right.steps[0].thought = "Worded otherwise."  # wording only
    right.steps[2].action_input = "2/0"
    right.steps[2].observation = "Error: division by zero again"
    diff = diff_traces(left, right)
    assert diff.rows[0].changes == ("thought",) and not diff.rows[0].acts_differently
    assert diff.first == 2
    assert diff.rows[2].changes == ("input", "observation")
    assert diff.summary() == "First difference at step 3: tool input, observation."


def test_only_wording_differs_then_the_first_wording_difference_is_marked() -> None:
    left, right = original_trace(), original_trace()
    right.steps[1].thought = "Now the news, please."
    diff = diff_traces(left, right)
    assert diff.first == 1 and diff.rows[1].changes == ("thought",)


def test_steps_are_aligned_by_number_call_and_retry() -> None:
    left = Trace(question="q", steps=[TraceStep(1, action="a", action_input="x", observation="o")])
    right = Trace(
        question="q",
        steps=[
            TraceStep(1, kind="format_error", raw="junk", error="no Action"),
            TraceStep(1, action="a", action_input="x", observation="o"),
            TraceStep(1, call=1, action="b", action_input="y", observation="p"),
        ],
        answer="done",
        status="answered",
    )
    diff = diff_traces(left, right)
    assert [row.label for row in diff.rows] == ["1", "1'", "1.2", "answer"]
    assert "kind" in diff.rows[0].changes
    assert diff.rows[1].changes == ("missing",) and diff.rows[1].left is None
    assert diff.rows[3].changes == ("answer", "status")
    assert diff.first == 0


def test_a_diff_holds_at_most_max_rows_steps() -> None:
    steps = [TraceStep(n, thought=str(n)) for n in range(1, MAX_ROWS + 50)]
    diff = diff_traces(Trace(question="q", steps=steps), Trace(question="q"))
    assert len(diff.rows) == MAX_ROWS + 1 and diff.omitted == 49
    assert diff.rows[-1].label == "answer"


def _render(diff: object, width: int, terminal: bool) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=terminal, color_system=None)
    render_diff(diff, console)  # type: ignore[arg-type]
    return out.getvalue()


def test_render_marks_the_first_difference_and_the_replayed_observations() -> None:
    left, right = original_trace(), original_trace()
    right.replay_of = left.id
    right.steps[0].replayed = True
    right.steps[2].action = "search"
    text = _render(diff_traces(left, right), 100, False)
    assert "▶ 3" in text and "First difference at step 3: tool" in text
    assert "Observation (replayed): 42" in text
    assert "(replay of orig00000001)" in text
    assert "\x1b[" not in text  # piped: plain
    assert all(cell_len(line) <= 100 for line in text.splitlines())


@st.composite
def traces(draw: st.DrawFn) -> Trace:
    text = hostile_text()
    huge = st.one_of(text, st.builds(lambda s, n: s * n, text, st.integers(1, 2000)))
    steps = []
    for n in range(1, draw(st.integers(0, 8)) + 1):
        steps.append(
            TraceStep(
                n,
                kind=draw(st.sampled_from(["step", "format_error", "final"])),
                thought=draw(huge),
                action=draw(st.none() | text),
                action_input=draw(st.none() | huge),
                observation=draw(st.none() | huge),
                error=draw(st.none() | text),
                call=draw(st.integers(0, 2)),
                replayed=draw(st.booleans()),
            )
        )
    return Trace(
        question=draw(text),
        id=draw(text),
        models=draw(st.lists(text, max_size=3)),
        steps=steps,
        answer=draw(st.none() | huge),
        status=draw(st.sampled_from(["answered", "failed", "cancelled"])),
        reason=draw(st.none() | text),
        replay_of=draw(st.none() | text),
        mode=draw(text),
    )


@PROPERTY
@given(traces(), traces(), st.integers(20, 200), st.booleans())
def test_diff_and_render_terminate_and_fit_any_width(
    left: Trace, right: Trace, width: int, terminal: bool
) -> None:
    diff = diff_traces(left, right)
    assert len(diff.rows) <= MAX_ROWS + 1
    assert diff_traces(left, left).first is None
    text = _render(diff, width, terminal)
    lines = text.splitlines()
    assert all(cell_len(line) <= width for line in lines), max(map(cell_len, lines))
    # bounded by the number of rows, whatever the size of the texts in them
    assert len(lines) <= 60 + len(diff.rows) * 200
    assert len(text) <= 5_000 + len(diff.rows) * 40_000


@PROPERTY
@given(st.lists(st.tuples(hostile_text(), hostile_text()), min_size=1, max_size=5), hostile_text())
def test_the_replaying_registry_answers_any_recorded_text_and_bounds_its_reasons(
    calls: list[tuple[str, str]], other: str
) -> None:
    """Whatever the inputs and observations hold (huge, hostile, any script), a recorded
    call gets its observation back as it was, and a stop's reason stays short."""
    steps = [
        TraceStep(n, action="calculate", action_input=arg, observation=obs)
        for n, (arg, obs) in enumerate(calls, 1)
    ]
    replaying = ReplayingTools(Counter().registry(), Trace(question="q", steps=steps))
    tool = replaying.registry.get("calculate")
    assert tool is not None
    first_seen: dict[tuple[str, str], str] = {}
    for arg, obs in calls:
        first_seen.setdefault(call_key("calculate", arg), obs)
    arg, _ = calls[0]
    result = asyncio.run(tool.run(arg))
    assert isinstance(result, ToolResult)
    assert result.text == first_seen[call_key("calculate", arg)].removeprefix(REPEAT_NOTE)
    if call_key("calculate", other * 50) not in first_seen:
        with pytest.raises(ToolError) as stopped:
            asyncio.run(tool.run(other * 50))
        assert len(str(stopped.value)) <= 400


async def test_a_replay_is_asked_for_the_original_asker_in_the_original_place() -> None:
    """Whoever types ``trace replay`` (root, in a container) did not ask the question: the
    replay's page says "asked by" the original's asker, with their id and channel."""
    original = original_trace()
    original.user, original.user_id, original.channel = "ada", "U1ADA", "#general"
    original.conversation = "slack:T0TEAM:C1GENERAL:1700000000.000002"
    replaying = ReplayingTools(Counter().registry(), original)
    model = ScriptedModel(["Thought: done\nAction: finish[42]"])
    final = await start_replay(_agent(model, replaying), original, replaying).wait()
    replay = finish_replay(final.trace, replaying)
    assert (replay.user, replay.user_id, replay.channel) == ("ada", "U1ADA", "#general")
    assert replay.conversation == original.conversation
