"""The GenAI attributes of chat and execute_tool spans (issue 30), through the real ``openai``
SDK to the local fake, the spans kept by the OpenTelemetry SDK's in-memory exporter: what the
request asked (temperature, max tokens, stop sequences, a JSON output), what the provider
answered (the reply's id and the model that wrote it), what each tool is, and one form of
``error.type`` on every span."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bot.telemetry import Provider, Telemetry, model_error_type
from core.agent import Agent, AgentSettings
from core.errors import ModelRateLimited, ModelUnavailable, ResponseFormatRefused
from core.events import Failed, FinalEvent, Finished, Mode
from core.openai_model import OpenAIChatModel
from core.tools import FunctionTool, ToolRegistry
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall

SIX_BY_SEVEN = '{"input": "6*7"}'  # a one-string tool's argument


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    # The provider answers with a dated version of the model asked for, as OpenAI does.
    async with FakeOpenAI(model="gpt-4o-2024-08-06") as server:
        yield server


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def tools() -> ToolRegistry:
    registry = ToolRegistry()

    async def calculate(arg: str) -> str:
        return "42"

    registry.add(FunctionTool("calculate", calculate, "Evaluates arithmetic.", "calculate[2+2]"))
    return registry


async def run(
    fake: FakeOpenAI, exporter: InMemorySpanExporter, mode: Mode, *, max_retries: int = 0
) -> tuple[FinalEvent, dict[str, list[ReadableSpan]]]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = Telemetry(provider.get_tracer("test"), Provider.openai_compatible(fake.base_url))
    model = OpenAIChatModel(
        model="gpt-4o",
        base_url=fake.base_url,
        api_key="sk-test",
        temperature=0.3,
        max_tokens=512,
        max_retries=max_retries,
    )
    agent = Agent(model, tools(), settings=AgentSettings(mode=mode), observers=[telemetry])
    try:
        final = await agent.start("What is 6*7?").wait()
    finally:
        await model.aclose()
    spans: dict[str, list[ReadableSpan]] = {}
    for span in exporter.get_finished_spans():
        spans.setdefault(span.name, []).append(span)
    return final, spans


async def test_a_chat_span_says_what_was_asked_and_who_answered(
    fake: FakeOpenAI, exporter: InMemorySpanExporter
) -> None:
    fake.reply("Thought: I will use the calculator.\nAction: calculate[6*7]")
    fake.reply("Thought: Done.\nAction: finish[42]")
    final, spans = await run(fake, exporter, "text")
    assert isinstance(final, Finished)
    first, second = spans["chat gpt-4o"]
    for n, chat in enumerate((first, second), start=1):
        attributes = chat.attributes or {}
        assert attributes["gen_ai.request.model"] == "gpt-4o"
        assert attributes["gen_ai.response.model"] == "gpt-4o-2024-08-06"
        assert attributes["gen_ai.response.id"] == f"chatcmpl-fake-{n}"
        assert attributes["gen_ai.request.temperature"] == 0.3
        assert attributes["gen_ai.request.max_tokens"] == 512
        assert attributes["gen_ai.request.stop_sequences"] == ("\nObservation:",)
        assert "gen_ai.output.type" not in attributes  # text mode asks for no output format
    (tool,) = spans["execute_tool calculate"]
    assert tool.attributes is not None
    assert tool.attributes["gen_ai.tool.type"] == "function"
    assert tool.attributes["gen_ai.tool.description"] == "Evaluates arithmetic."


async def test_json_mode_says_its_output_type_and_sends_no_stop_sequences(
    fake: FakeOpenAI, exporter: InMemorySpanExporter
) -> None:
    fake.reply(json.dumps({"thought": "Known.", "action": None, "answer": "42"}))
    final, spans = await run(fake, exporter, "json")
    assert isinstance(final, Finished) and final.answer == "42"
    (chat,) = spans["chat gpt-4o"]
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.output.type"] == "json"
    assert "gen_ai.request.stop_sequences" not in chat.attributes


async def test_a_native_tool_call_span_names_its_type_and_description(
    fake: FakeOpenAI, exporter: InMemorySpanExporter
) -> None:
    fake.reply("", tool_calls=[FakeToolCall("calculate", SIX_BY_SEVEN)])
    fake.reply("6*7 = 42.")
    final, spans = await run(fake, exporter, "tools")
    assert isinstance(final, Finished)
    (tool,) = spans["execute_tool calculate"]
    assert tool.attributes is not None
    assert tool.attributes["gen_ai.tool.type"] == "function"
    assert tool.attributes["gen_ai.tool.description"] == "Evaluates arithmetic."
    assert tool.attributes["gen_ai.tool.call.id"] == "call_0"
    for chat in spans["chat gpt-4o"]:
        assert chat.attributes is not None
        assert "gen_ai.output.type" not in chat.attributes


async def test_error_type_is_one_short_word_on_every_span(
    fake: FakeOpenAI, exporter: InMemorySpanExporter
) -> None:
    fake.reply("Thought: a tool that does not exist.\nAction: nosuch[x]")
    fake.error(503, "The engine is overloaded.")
    final, spans = await run(fake, exporter, "text")
    assert isinstance(final, Failed)
    (tool,) = spans["execute_tool nosuch"]
    ok, failed = spans["chat gpt-4o"]
    (root,) = spans["invoke_agent reactbot"]
    kinds = [(s.attributes or {}).get("error.type") for s in (tool, ok, failed, root)]
    assert kinds == ["unknown_tool", None, "unavailable", "model"]
    assert "gen_ai.tool.description" not in (tool.attributes or {})  # no tool has that name


def test_model_error_types_are_the_class_names_in_snake_case() -> None:
    assert model_error_type(ModelUnavailable("x")) == "unavailable"
    assert model_error_type(ModelRateLimited("x")) == "rate_limited"
    assert model_error_type(ResponseFormatRefused("x")) == "response_format_refused"
    assert model_error_type(KeyError("bug")) == "internal"
