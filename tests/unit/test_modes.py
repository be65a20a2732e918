"""The three modes give one trace: native tool calls (``tools``) and a JSON object per reply
(``json``) beside ReAct text, multi-argument tools, and the pieces the modes are built from."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest

from core.agent import Agent, AgentSettings
from core.errors import ResponseFormatRefused
from core.events import (
    ActionDecided,
    AnswerDelta,
    Event,
    Finished,
    FormatRetry,
    Notice,
    ObservationReady,
    RunStarted,
    ThoughtDelta,
)
from core.llm import ToolCallDelta
from core.modes import JsonFieldStreamer, ToolCallAssembler, json_step
from core.parser import Action, ParseError, Step
from core.prompt import system_prompt
from core.scripted import ScriptedModel, Turn
from core.tools import FunctionTool, ToolRegistry, ToolResult
from core.tools.calculator import CalculatorTool
from core.tools.schema import compact_schema, tool_spec

ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


async def add(a: int, b: int) -> str:
    return str(a + b)


def registry(*extra: FunctionTool) -> ToolRegistry:
    async def calculate(arg: str) -> str:
        return {"6*7": "42", "2+2": "4"}.get(arg.replace(" ", ""), "?")

    tools = ToolRegistry()
    tools.add(
        FunctionTool(
            "calculate", calculate, "Arithmetic.", "calculate[2+2]", input_name="expression"
        )
    )
    for tool in extra:
        tools.add(tool)
    return tools


async def run(agent: Agent, question: str = "What is 6*7?") -> list[Event]:
    return [event async for event in agent.run(question)]


async def run_per_chunk(agent: Agent, question: str = "What is 6*7?") -> list[Event]:
    """Every piece as the format lets it out (no ``text_latency``): how a reply streams."""
    return [event async for event in agent.start(question).events(text_latency=0)]


def final(events: Sequence[Event]) -> Finished:
    last = events[-1]
    assert isinstance(last, Finished), last
    return last


# ---- tools mode ---------------------------------------------------------------------------


async def test_tools_mode_calls_natively_and_gives_the_same_trace_shape() -> None:
    model = ScriptedModel(
        [
            Turn(
                "I will use the calculator.", tool_calls=(("calculate", '{"expression": "6*7"}'),)
            ),
            Turn("6*7 = 42.", chunk_size=3),
        ]
    )
    agent = Agent(model, registry(), settings=AgentSettings(mode="tools"))
    events = await run(agent)
    done = final(events)
    assert done.answer == "6*7 = 42." and done.status == "answered"
    assert isinstance(events[0], RunStarted) and events[0].mode == "tools"
    thought = "".join(e.text for e in events if isinstance(e, ThoughtDelta) and e.step == 1)
    assert thought == "I will use the calculator."
    assert [e for e in events if isinstance(e, ActionDecided)] == [
        ActionDecided(1, "calculate", "6*7")  # the string, as text mode records it
    ]
    trace = done.trace
    assert trace.mode == "tools" and trace.step_count == 2
    first = trace.steps[0]
    assert (first.thought, first.action, first.action_input, first.observation) == (
        "I will use the calculator.",
        "calculate",
        "6*7",
        "42",
    )
    assert first.call_id == "call_0"
    spec = model.calls[0].tools
    assert spec is not None and spec[0]["function"]["name"] == "calculate"
    assert spec[0]["function"]["parameters"]["required"] == ["expression"]
    sent = model.calls[1].messages
    assert sent[-2]["tool_calls"][0]["function"] == {
        "name": "calculate",
        "arguments": '{"expression": "6*7"}',
    }
    assert sent[-1]["role"] == "tool" and sent[-1]["tool_call_id"] == "call_0"
    assert sent[-1]["content"] == "<observation>\n42\n</observation>"
    assert "function-calling" in sent[0]["content"]
    model.assert_complete()


async def test_parallel_calls_run_concurrently_each_with_its_own_observation() -> None:
    started: list[str] = []
    both = asyncio.Event()

    async def search(query: str) -> ToolResult:
        started.append(query)
        if len(started) == 2:
            both.set()
        async with asyncio.timeout(2):
            await both.wait()  # only finishes if the other call runs at the same time
        return ToolResult(f"results for {query}", (f"https://{query}.example/",))

    tool = FunctionTool("search", search, "Searches.", "search[x]", input_name="query")
    calls = (("search", '{"query": "tokyo"}'), ("search", '{"query": "paris"}'))
    model = ScriptedModel([Turn("Two searches at once.", tool_calls=calls), Turn("Both found.")])
    done = final(await run(Agent(model, registry(tool), settings=AgentSettings(mode="tools"))))
    trace = done.trace
    tool_steps = [s for s in trace.steps if s.action]
    assert [(s.index, s.call, s.action_input, s.call_id) for s in tool_steps] == [
        (1, 0, "tokyo", "call_0"),
        (1, 1, "paris", "call_1"),
    ]
    assert [s.observation for s in tool_steps] == ["results for tokyo", "results for paris"]
    assert trace.step_count == 2  # the second call is not a model step
    answers = model.calls[1].messages[-2:]
    assert [(m["role"], m.get("tool_call_id")) for m in answers] == [
        ("tool", "call_0"),
        ("tool", "call_1"),
    ]


async def test_a_bad_call_becomes_an_observation_and_the_model_corrects_itself() -> None:
    tools = registry(FunctionTool("add", add, "Adds.", 'add[{"a": 1, "b": 2}]', ADD_SCHEMA))
    model = ScriptedModel(
        [
            Turn(
                "",
                tool_calls=(
                    ("add", '{"a": 1, "b": "two"}'),
                    ("calculate", '{"expression": '),  # cut off mid-arguments
                    ("weather", "{}"),
                ),
                finish="length",
            ),
            Turn("", tool_calls=(("add", '{"a": 1, "b": 2}'),)),
            Turn("1 + 2 = 3."),
        ]
    )
    events = await run(Agent(model, tools, settings=AgentSettings(mode="tools")), "1+2?")
    observations = [e for e in events if isinstance(e, ObservationReady)]
    assert observations[0].error and "field 'b': 'two' is not of type 'integer'" in (
        observations[0].text
    )
    assert observations[1].error and "calculate: the input must be" not in observations[1].text
    assert observations[1].text.startswith("Error: calculate:")
    assert observations[2].error and "Unknown action 'weather'" in observations[2].text
    assert observations[3] == ObservationReady(1 + 1, "add", "3", False, observations[3].seconds)
    assert not any(isinstance(e, FormatRetry) for e in events)
    assert final(events).answer == "1 + 2 = 3."


async def test_an_empty_tools_reply_is_re_asked() -> None:
    model = ScriptedModel([Turn(""), Turn("It is 42.")])
    events = await run(Agent(model, registry(), settings=AgentSettings(mode="tools")))
    assert [e.reason for e in events if isinstance(e, FormatRetry)] == ["the reply is empty"]
    assert "call a tool, or give the answer as plain text" in model.calls[1].messages[-1]["content"]
    assert final(events).answer == "It is 42."


async def test_when_steps_run_out_tools_mode_asks_for_the_answer_without_tools() -> None:
    loop = Turn("Again.", tool_calls=(("calculate", '{"expression": "2+2"}'),))
    model = ScriptedModel([loop, loop, Turn("Best guess: 4.")])
    done = final(
        await run(Agent(model, registry(), settings=AgentSettings(mode="tools", max_steps=2)))
    )
    assert done.status == "best_effort" and done.answer == "Best guess: 4."
    assert model.calls[2].tools is None
    assert "Reply with the answer as plain text" in model.calls[2].messages[-1]["content"]


# ---- json mode ----------------------------------------------------------------------------


async def test_json_mode_streams_the_thought_live_and_answers() -> None:
    step_one = json.dumps(
        {
            "thought": 'Arithmetic: "6*7".',
            "action": {"name": "calculate", "input": "6*7"},
            "answer": None,
        }
    )
    step_two = json.dumps({"thought": "Done.", "action": None, "answer": "6*7 = 42."})
    # a small delay between chunks: the consumer takes each piece as it comes (see below)
    model = ScriptedModel(
        [Turn(step_one, chunk_size=3, delay=0.001), Turn(step_two, chunk_size=2, delay=0.001)]
    )
    events = await run_per_chunk(Agent(model, registry(), settings=AgentSettings(mode="json")))
    thoughts = [e.text for e in events if isinstance(e, ThoughtDelta) and e.step == 1]
    assert len(thoughts) > 3 and "".join(thoughts) == 'Arithmetic: "6*7".'
    assert "".join(e.text for e in events if isinstance(e, AnswerDelta)) == "6*7 = 42."
    done = final(events)
    assert done.answer == "6*7 = 42." and done.trace.mode == "json"
    assert done.trace.steps[0].action_input == "6*7"
    format_ = model.calls[0].response_format
    assert format_ is not None and format_["type"] == "json_schema"
    assert format_["json_schema"]["strict"] is True
    assert model.calls[0].stop == []


async def test_invalid_json_is_re_asked_in_json() -> None:
    model = ScriptedModel(
        ['{"thought": "oops"', '{"thought": "ok", "action": null, "answer": "42"}']
    )
    events = await run(Agent(model, registry(), settings=AgentSettings(mode="json")))
    (retry,) = [e for e in events if isinstance(e, FormatRetry)]
    assert retry.reason.startswith("the reply is not valid JSON")
    assert '{"thought": "...", "action"' in model.calls[1].messages[-1]["content"]
    assert final(events).answer == "42"


async def test_a_provider_refusing_json_schema_gets_json_object_then_text() -> None:
    refused = ResponseFormatRefused("The model provider does not take this response_format.")
    model = ScriptedModel(
        [
            Turn(error=refused),
            Turn(error=refused),
            "Thought: plain text now.\nAction: finish[42]",
            "Thought: again.\nAction: finish[43]",
        ]
    )
    agent = Agent(model, registry(), settings=AgentSettings(mode="json"))
    events = await run(agent)
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert notices == [
        "the model endpoint does not take JSON schemas; asking for a JSON object",
        "the model endpoint does not take JSON output; answering in text mode",
    ]
    formats = [c.response_format["type"] if c.response_format else None for c in model.calls]
    assert formats == ["json_schema", "json_object", None]
    done = final(events)
    assert done.answer == "42" and done.trace.mode == "text"
    assert "Thought: what you know so far" in model.calls[2].messages[0]["content"]
    second = await run(agent)  # remembered: no new notice, straight to text
    assert not [e for e in second if isinstance(e, Notice)]
    assert final(second).trace.mode == "text"


# ---- tools with several arguments, in text mode ---------------------------------------------


async def test_text_mode_calls_a_schema_tool_with_a_json_object() -> None:
    tools = registry(
        FunctionTool("add", add, "Adds two integers.", 'add[{"a": 1, "b": 2}]', ADD_SCHEMA)
    )
    model = ScriptedModel(
        [
            'Thought: add them.\nAction: add[{"a": 1}]',
            'Thought: both now.\nAction: add[{"b": 2, "a": 40}]',
            "Thought: done.\nAction: finish[42]",
        ]
    )
    events = await run(Agent(model, tools), "40+2?")
    observations = [e.text for e in events if isinstance(e, ObservationReady)]
    assert observations == ["Error: add: the arguments: 'b' is a required property", "42"]
    assert (
        'Input: a JSON object {"a": integer, "b": integer}.'
        in model.calls[0].messages[0]["content"]
    )
    assert final(events).trace.steps[1].action_input == '{"b": 2, "a": 40}'


def test_a_tool_with_a_broken_schema_is_refused_at_registration() -> None:
    with pytest.raises(ValueError, match="invalid parameters schema"):
        registry(FunctionTool("bad", add, "Bad.", "bad[{}]", {"type": "object", "required": 3}))
    with pytest.raises(ValueError, match="must describe an object"):
        registry(FunctionTool("bad", add, "Bad.", "bad[1]", {"type": "integer"}))


def test_tool_specs_and_compact_schemas() -> None:
    calculator = CalculatorTool()
    spec = tool_spec(calculator)
    assert spec["function"]["parameters"]["properties"]["expression"]["type"] == "string"
    assert (
        compact_schema(
            {
                "type": "object",
                "properties": {
                    "unit": {"enum": ["km", "mi"]},
                    "values": {"type": "array", "items": {"type": "number"}},
                    "note": {"type": ["string", "null"]},
                },
                "required": ["unit"],
            }
        )
        == '{"unit": one of "km"|"mi", "values": array of number (optional), "note": string|null (optional)}'
    )


def test_each_mode_has_its_own_system_prompt() -> None:
    tools = registry(FunctionTool("add", add, "Adds.", 'add[{"a": 1, "b": 2}]', ADD_SCHEMA))
    text, native, as_json = (system_prompt(tools, m) for m in ("text", "tools", "json"))  # type: ignore[arg-type]
    assert "Action: tool_name[input]" in text and "- calculate: Arithmetic." in text
    assert "function-calling interface" in native and "- calculate" not in native
    assert '"answer": "the complete answer for the user" or null' in as_json
    assert 'Example input: "{\\"a\\": 1, \\"b\\": 2}"' in as_json
    for prompt in (text, native, as_json):
        assert "never instructions" in " ".join(prompt.split())


# ---- the pieces ---------------------------------------------------------------------------


def test_tool_call_deltas_assemble_by_index_whatever_the_interleaving() -> None:
    assembler = ToolCallAssembler()
    assembler.feed([ToolCallDelta(0, "call_a", "search"), ToolCallDelta(1, "call_b", "calculate")])
    assembler.feed([ToolCallDelta(1, arguments='{"expr')])
    assembler.feed(
        [ToolCallDelta(0, arguments='{"query": "to'), ToolCallDelta(1, arguments='ession": "6*7"}')]
    )
    assembler.feed([ToolCallDelta(0, arguments='kyo"}')])
    calls = assembler.calls()
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_a", "search", {"query": "tokyo"}),
        ("call_b", "calculate", {"expression": "6*7"}),
    ]


JSON_REPLY = (
    '{"thought": "Line\\nbreak, \\"quote\\", caf\\u00e9, \\ud83d\\ude00 and \\\\ slash", '
    '"action": {"name": "x", "input": "{\\"thought\\": \\"not this\\"}"}, "answer": null}'
)


@pytest.mark.parametrize("cut", range(len(JSON_REPLY) + 1))
def test_the_json_thought_streams_the_same_whatever_the_chunking(cut: int) -> None:
    streamer = JsonFieldStreamer()
    pieces = streamer.feed(JSON_REPLY[:cut]) + streamer.feed(JSON_REPLY[cut:])
    assert "".join(text for field, text in pieces if field == "thought") == (
        'Line\nbreak, "quote", café, 😀 and \\ slash'
    )
    assert all(field == "thought" for field, _ in pieces)


def test_json_step_reads_answers_actions_and_refuses_the_rest() -> None:
    assert json_step('{"thought": "t", "action": null, "answer": "42"}') == Step("t", None, "42")
    assert json_step(
        '```json\n{"thought": "t", "action": {"name": "Add", "input": {"a": 1}}, "answer": null}\n```'
    ) == Step("t", Action("add", '{"a": 1}'), None)
    assert json_step('{"action": {"name": "finish", "input": "done"}}') == Step(None, None, "done")
    for bad, reason in [
        ("", "the reply is empty"),
        ("[1]", "the reply is not a JSON object"),
        ('{"thought": "t"}', "the reply has neither an action nor an answer"),
        ('{"action": {"input": "x"}}', "the action has no tool name"),
    ]:
        with pytest.raises(ParseError, match=reason):
            json_step(bad)


async def test_in_tools_mode_a_long_answer_streams_live_and_a_thought_waits_for_its_call() -> None:
    answer = "The answer, at some length. " * 20  # well past one short sentence
    model = ScriptedModel(
        [
            Turn("Compute it.", tool_calls=(("calculate", '{"expression": "6*7"}'),), chunk_size=2),
            Turn(answer, chunk_size=10, delay=0.001),
        ]
    )
    events = await run_per_chunk(Agent(model, registry(), settings=AgentSettings(mode="tools")))
    thoughts = [e.text for e in events if isinstance(e, ThoughtDelta)]
    assert thoughts == ["Compute it."]  # held until the call began, then shown whole
    answers = [e.text for e in events if isinstance(e, AnswerDelta)]
    assert len(answers) > 5 and "".join(answers) == answer  # streamed as it came
    assert final(events).answer == answer.strip()


async def test_text_a_consumer_has_not_taken_yet_is_merged_never_lost() -> None:
    """A model faster than its consumer: the text waiting in the queue is one event per kind
    and step, not one per chunk; order and content are kept."""
    reply = "Thought: " + "word " * 200 + "\nAction: finish[" + "answer " * 100 + "]"
    run = Agent(ScriptedModel([Turn(reply, chunk_size=4)]), registry()).start("q")
    await run.wait()  # the consumer falls behind by the whole run
    events = [event async for event in run.events()]
    texts = [
        (type(e).__name__, e.text) for e in events if isinstance(e, (ThoughtDelta, AnswerDelta))
    ]
    assert [kind for kind, _ in texts] == ["ThoughtDelta", "AnswerDelta"]
    assert texts[0][1].strip() == ("word " * 200).strip()
    assert texts[1][1].strip() == ("answer " * 100).strip()


def test_which_tools_need_a_persons_approval() -> None:
    from core.tools import ToolHints, needs_approval

    calculator = CalculatorTool()
    assert not needs_approval(calculator)  # read-only by its own hints
    assert needs_approval(calculator, frozenset({"calculate"}))  # the operator lists it
    plain = FunctionTool("plain", add, "No hints.", "plain[x]")
    assert not needs_approval(plain)  # says nothing, as the built-ins always did
    writer = FunctionTool("writer", add, "Writes.", "writer[x]", hints=ToolHints())
    assert needs_approval(writer)  # MCP's defaults: a tool that says nothing may change things
    writer.approval = False  # an operator's override
    assert not needs_approval(writer)
