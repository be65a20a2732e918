"""The three modes through the real ``openai`` SDK over HTTP to the local fake, which streams
tool calls as providers do (id and name first, arguments cut mid-token, calls interleaved,
``finish_reason`` ``tool_calls`` or ``length``) and refuses ``response_format`` types a
model cannot produce with OpenAI's 400."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.app import App
from bot.cli import run_cli
from bot.config import Config, load_config
from bot.ops import Metrics
from core.agent import Agent, AgentSettings
from core.events import AnswerDelta, Event, Finished, FormatRetry, Mode, Notice
from core.openai_model import OpenAIChatModel
from core.trace import Trace, summary_line
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall

SIX_BY_SEVEN = '{"expression": "6*7"}'


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def env_for(fake: FakeOpenAI) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": fake.base_url,
        "REACTBOT_MODEL": "fake-model",
    }


async def ask(fake: FakeOpenAI, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = await run_cli(["ask", *args], env=env_for(fake), stdout=out)
    return code, out.getvalue()


def script(fake: FakeOpenAI, mode: Mode) -> None:
    """The same two steps (the calculator, then the answer) in the mode's own words."""
    if mode == "tools":
        fake.reply(
            "I will use the calculator.",
            tool_calls=[FakeToolCall("calculate", SIX_BY_SEVEN, argument_chunk_size=3)],
        )
        fake.reply("6*7 = 42.")
    elif mode == "json":
        first = {
            "thought": "I will use the calculator.",
            "action": {"name": "calculate", "input": "6*7"},
            "answer": None,
        }
        fake.reply(json.dumps(first), chunks=5)
        fake.reply(json.dumps({"thought": "Done.", "action": None, "answer": "6*7 = 42."}))
    else:
        fake.reply("Thought: I will use the calculator.\nAction: calculate[6*7]")
        fake.reply("Thought: Done.\nAction: finish[6*7 = 42.]")


@pytest.mark.parametrize("mode", ["tools", "json"])
async def test_ask_answers_42_through_the_calculator_in_each_mode(
    fake: FakeOpenAI, mode: Mode
) -> None:
    script(fake, mode)
    code, out = await ask(fake, "--mode", mode, "What is 6*7?")
    assert code == 0, out
    assert "Thought: I will use the calculator." in out
    assert "Action: calculate[6*7]" in out
    assert "Observation: 42" in out
    assert "Answer: 6*7 = 42." in out
    assert f"{mode} mode" in out.splitlines()[-1]
    fake.assert_complete()
    first, second = fake.requests
    if mode == "tools":
        assert first["tool_choice"] == "auto" and "stop" not in first
        (spec,) = [t for t in first["tools"] if t["function"]["name"] == "calculate"]
        assert spec["function"]["parameters"]["required"] == ["expression"]
        call, result = second["messages"][-2:]
        assert call["tool_calls"][0]["function"] == {"name": "calculate", "arguments": SIX_BY_SEVEN}
        assert result == {
            "role": "tool",
            "tool_call_id": "call_0",
            "content": "<observation>\n42\n</observation>",
        }
    else:
        assert first["response_format"]["type"] == "json_schema"
        assert first["response_format"]["json_schema"]["strict"] is True
        assert "tools" not in first


async def run_with(fake: FakeOpenAI, mode: Mode) -> tuple[Trace, list[Event]]:
    app = App.create(load_config(None, env_for(fake)))
    try:
        events = [e async for e in app.agent.run("What is 6*7?", mode=mode)]
    finally:
        await app.aclose()
    final = events[-1]
    assert isinstance(final, Finished), final
    return final.trace, events


def shape(trace: Trace) -> list[tuple[Any, ...]]:
    return [(s.index, s.kind, s.call, s.action, s.action_input, s.observation) for s in trace.steps]


async def test_the_trace_has_the_same_shape_in_all_three_modes(fake: FakeOpenAI) -> None:
    traces = {}
    for mode in ("text", "tools", "json"):
        script(fake, mode)  # type: ignore[arg-type]
        traces[mode], events = await run_with(fake, mode)  # type: ignore[arg-type]
        assert [type(e).__name__ for e in events if type(e).__name__ != "ThoughtDelta"][:5] == [
            "RunStarted",
            "StepStarted",
            "UsageCounted",
            "ActionDecided",
            "ObservationReady",
        ]
    assert shape(traces["tools"]) == shape(traces["text"]) == shape(traces["json"])
    # the step's thought is the same; an answer in tools mode is the reply itself, no thought
    assert {t.steps[0].thought for t in traces.values()} == {"I will use the calculator."}
    assert [t.answer for t in traces.values()] == ["6*7 = 42."] * 3
    assert [t.mode for t in traces.values()] == ["text", "tools", "json"]
    loaded = Trace.from_json(traces["tools"].to_json())
    assert loaded.mode == "tools" and loaded.steps[0].call_id == "call_0"


async def test_parallel_calls_arrive_interleaved_and_each_gets_its_observation(
    fake: FakeOpenAI,
) -> None:
    fake.reply(
        "Both at once.",
        tool_calls=[
            FakeToolCall("calculate", SIX_BY_SEVEN, id="call_calc", argument_chunk_size=2),
            FakeToolCall("lookup", '{"query": "connect to Slack"}', id="call_look"),
        ],
    )
    fake.reply("6*7 is 42, and Slack is set up with a bot token.")
    trace, _ = await run_with(fake, "tools")
    calls = [(s.index, s.call, s.action, s.call_id) for s in trace.steps if s.action]
    assert calls == [(1, 0, "calculate", "call_calc"), (1, 1, "lookup", "call_look")]
    assert trace.steps[0].observation == "42"
    assert "slack.md" in (trace.steps[1].observation or "")
    results = fake.requests[1]["messages"][-2:]
    assert [m["tool_call_id"] for m in results] == ["call_calc", "call_look"]


async def test_arguments_cut_off_at_max_tokens_become_an_observation(fake: FakeOpenAI) -> None:
    fake.reply(
        "",
        tool_calls=[FakeToolCall("calculate", '{"expression": "6*', argument_chunk_size=4)],
        finish_reason="length",
    )
    fake.reply("", tool_calls=[FakeToolCall("calculate", SIX_BY_SEVEN)])
    fake.reply("42.")
    trace, _ = await run_with(fake, "tools")
    first = trace.steps[0]
    assert first.error is not None
    assert first.error.startswith("Error: calculate: the arguments are not valid JSON")
    assert trace.steps[1].observation == "42" and trace.answer == "42."


async def test_a_model_without_json_schema_gets_json_object_then_text(
    fake: FakeOpenAI,
) -> None:
    async with FakeOpenAI(response_formats=("text", "json_object")) as partial:
        partial.reply(json.dumps({"thought": "t", "action": None, "answer": "42"}))
        trace, events = await run_with(partial, "json")
        assert trace.mode == "json" and trace.answer == "42"
        kinds = [r["response_format"]["type"] for r in partial.requests]
        assert kinds == ["json_schema", "json_object"]  # the first got OpenAI's 400
    async with FakeOpenAI(response_formats=("text",)) as plain:
        plain.reply("Thought: plain.\nAction: finish[42]")
        trace, events = await run_with(plain, "json")
        notices = [e.text for e in events if isinstance(e, Notice)]
        assert notices[-1] == "the model endpoint does not take JSON output; answering in text mode"
        assert trace.mode == "text" and trace.answer == "42"
        assert [r.get("response_format", {}).get("type") for r in plain.requests] == [
            "json_schema",
            "json_object",
            None,
        ]


async def test_a_multi_argument_tool_is_called_natively_and_checked(fake: FakeOpenAI) -> None:
    from core.agent import Agent, AgentSettings
    from core.openai_model import OpenAIChatModel
    from core.tools import FunctionTool, ToolRegistry

    async def add(a: int, b: int) -> str:
        return str(a + b)

    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }
    tools = ToolRegistry()
    tools.add(FunctionTool("add", add, "Adds two integers.", 'add[{"a": 1, "b": 2}]', schema))
    fake.reply(
        "Adding.",
        reasoning=["The user wants ", "a sum."],
        tool_calls=[FakeToolCall("add", '{"a": 40, "b": "two"}', argument_chunk_size=3)],
    )
    fake.reply("", tool_calls=[FakeToolCall("add", '{"a": 40, "b": 2}', argument_chunk_size=3)])
    answer = "40 + 2 = 42. " + "The sum is checked by the tool, not from memory. " * 6
    fake.reply(answer, chunks=40, delay=0.05)  # chunks further apart than TEXT_LATENCY
    model = OpenAIChatModel(model="fake-model", base_url=fake.base_url, api_key="sk-test")
    try:
        agent = Agent(model, tools, settings=AgentSettings(mode="tools"))
        events = [e async for e in agent.run("40+2?")]
    finally:
        await model.aclose()
    final = events[-1]
    assert isinstance(final, Finished) and final.answer == answer.strip()
    first, second = final.trace.tool_steps
    assert first.error == "Error: add: field 'b': 'two' is not of type 'integer'"
    assert first.reasoning == "The user wants a sum." and first.thought == "Adding."
    assert (second.action_input, second.observation) == ('{"a": 40, "b": 2}', "42")
    assert fake.requests[0]["tools"][0]["function"]["parameters"] == schema
    answers = [e for e in events if type(e).__name__ == "AnswerDelta"]
    assert len(answers) > 1  # a long answer streams as it comes, over real HTTP
    fake.assert_complete()


async def test_a_refused_json_schema_is_remembered_for_that_model_only(tmp_path: Path) -> None:
    # Two channels on two catalogue models, one Agent: "small" refuses json_schema; the
    # other channel's next question must still ask "big" for json_schema.
    async with (
        FakeOpenAI(model="small", response_formats=("text", "json_object")) as small,
        FakeOpenAI(model="big") as big,
    ):
        config = tmp_path / "models.yaml"
        config.write_text(
            "models:\n"
            f"  small: {{name: small, base_url: '{small.base_url}', api_key_env: SMALL_KEY}}\n"
            f"  big: {{name: big, base_url: '{big.base_url}', api_key_env: BIG_KEY}}\n"
        )
        env = {**env_for(big), "SMALL_KEY": "sk-small", "BIG_KEY": "sk-big"}
        app = App.create(load_config(str(config), env))
        answer = json.dumps({"thought": "t", "action": None, "answer": "42"})
        try:
            for fake, name in ((small, "small"), (big, "big"), (small, "small")):
                fake.reply(answer)
                run = app.agent.start("What is 6*7?", mode="json", model=app.catalogue[name])
                events = [e async for e in run.events()]
                assert isinstance(events[-1], Finished) and events[-1].trace.answer == "42"
        finally:
            await app.aclose()
        kinds = [r["response_format"]["type"] for r in small.requests]
        assert kinds == ["json_schema", "json_object", "json_object"]  # refused once, remembered
        assert [r["response_format"]["type"] for r in big.requests] == ["json_schema"]


REFUSAL = ("I'm sorry, ", "but I can't ", "help with that.")


@pytest.mark.parametrize("mode", ["text", "tools", "json"])
async def test_a_refusal_is_the_answer_with_its_own_outcome_and_no_re_ask(
    fake: FakeOpenAI, mode: Mode
) -> None:
    """OpenAI streams a refusal in ``delta.refusal`` with ``content`` null (issue 30)."""
    fake.reply(refusal=REFUSAL)
    app = App.create(Config())
    metrics = Metrics(app)
    model = OpenAIChatModel(model="fake-model", base_url=fake.base_url, api_key="sk-test")
    agent = Agent(model, app.tools, settings=AgentSettings(mode=mode), observers=[metrics.observer])
    try:
        events = [e async for e in agent.run("How do I pick a lock?", conversation="slack:C1:1.0")]
    finally:
        await model.aclose()
    fake.assert_complete()  # one request: a refusal is not re-asked
    assert not any(isinstance(e, FormatRetry) for e in events)
    streamed = "".join(e.text for e in events if isinstance(e, AnswerDelta))
    assert streamed == "".join(REFUSAL)
    done = events[-1]
    assert isinstance(done, Finished) and done.status == "refused"
    assert done.answer == "I'm sorry, but I can't help with that."
    trace = done.trace
    assert trace.status == "refused" and trace.answer == done.answer
    assert trace.steps[-1].refusal == "".join(REFUSAL)
    assert summary_line(trace).startswith("refused by the model · 1 step")
    assert Trace.from_json(trace.to_json()).steps[-1].refusal == "".join(REFUSAL)
    runs = metrics.registry.get_sample_value(
        "reactbot_runs_total", {"platform": "slack", "outcome": "refused"}
    )
    assert runs == 1


async def test_ask_shows_a_refusal_as_the_answer_with_a_refused_footer(fake: FakeOpenAI) -> None:
    fake.reply(refusal=REFUSAL)
    code, out = await ask(fake, "How do I pick a lock?")
    assert code == 0, out
    assert "Answer: I'm sorry, but I can't help with that." in out
    assert "re-asking" not in out and "did not follow the format" not in out
    assert out.splitlines()[-1].startswith("🚫 refused by the model · 1 step")
    fake.assert_complete()
