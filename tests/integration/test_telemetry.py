"""OpenTelemetry traces, end to end: the real SDK and OTLP/HTTP exporter send to a local
receiver (tests/fakes/otlp_server.py), which decodes each request with the OpenTelemetry
protobuf package; the spans are checked for names, kinds, parent links and the GenAI
attributes, with and without captured content, and for errors. Without telemetry configured,
no OpenTelemetry module is ever imported."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.cli import run_cli
from bot.logs import REDACTED
from bot.telemetry import (
    CONTENT_LIMIT,
    Capture,
    Provider,
    Telemetry,
    start_tracing,
    traces_endpoint,
)
from core.agent import Agent, AgentSettings
from core.events import Cancelled, ObservationReady
from core.scripted import ScriptedModel, Turn
from core.tools import FunctionTool, ToolRegistry
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall, FakeUsage
from tests.fakes.otlp_server import FakeOTLP, ReceivedSpan
from tests.fakes.slack_server import FakeSlack

ROOT = Path(__file__).resolve().parents[2]
INTERNAL, CLIENT = 1, 3
UNSET, ERROR = 0, 2
CONTENT_KEYS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}
SECRET = "sk-test-secret-0123456789"
SIX_BY_SEVEN = '{"expression": "6*7"}'


@pytest.fixture
async def otlp() -> AsyncIterator[FakeOTLP]:
    async with FakeOTLP() as receiver:
        yield receiver


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def only(spans: list[ReceivedSpan]) -> ReceivedSpan:
    assert len(spans) == 1, [s.name for s in spans]
    return spans[0]


def run_span(otlp: FakeOTLP) -> ReceivedSpan:
    return only(otlp.named("invoke_agent reactbot"))


def assert_one_trace_under(root: ReceivedSpan, spans: list[ReceivedSpan]) -> None:
    assert root.parent_span_id == ""
    for span in spans:
        if span.span_id == root.span_id:
            continue
        assert span.trace_id == root.trace_id, span.name
        assert span.parent_span_id == root.span_id, span.name
        assert root.start_ns <= span.start_ns <= span.end_ns <= root.end_ns, span.name


def everything_said(spans: list[ReceivedSpan]) -> str:
    """Every text the spans carry: string attributes and status messages. Numbers are left
    out: a time such as 0.0039512 says "395" by chance (it failed CI once), and no number
    carries content."""
    values = [v for s in spans for v in s.attributes.values()]
    texts = [t for v in values for t in (v if isinstance(v, (list, tuple)) else [v])]
    texts = [t for t in texts if isinstance(t, str)]
    texts += [s.status_message for s in spans]
    return json.dumps(texts, ensure_ascii=False)


async def ask(
    args: list[str], env: dict[str, str], *, config: str | None = None
) -> tuple[int, str]:
    out = io.StringIO()
    before = ["--config", config] if config else []
    code = await run_cli([*before, "ask", *args], env=env, stdout=out)
    return code, out.getvalue()


def write_config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


async def test_a_demo_run_is_one_trace_of_genai_spans_flushed_before_ask_returns(
    otlp: FakeOTLP,
) -> None:
    code, out = await ask(["What is 17*23+4?"], {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint})
    assert code == 0, out
    assert "395" in out
    spans = otlp.spans  # no waiting: exit flushed them
    root = run_span(otlp)
    assert root.kind == INTERNAL
    assert root.resource["service.name"] == "reactbot"
    assert root.scope == "reactbot"
    assert {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "reactbot",
        "gen_ai.provider.name": "reactbot.demo",
        "gen_ai.conversation.id": "terminal",
        "gen_ai.request.model": "offline demo model",
        "reactbot.run.status": "answered",
        "reactbot.run.steps": 2,
    }.items() <= root.attributes.items()
    chats = otlp.named("chat offline demo model")
    assert len(chats) == 2
    for chat in chats:
        assert chat.kind == INTERNAL  # the demo model runs in this process
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "reactbot.demo"
        assert chat.attributes["gen_ai.request.model"] == "offline demo model"
        assert chat.attributes["gen_ai.request.stream"] is True
        assert 0 < chat.attributes["gen_ai.response.time_to_first_chunk"] < 5
    tool = only(otlp.named("execute_tool calculate"))
    assert tool.kind == INTERNAL
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "calculate"
    assert chats[0].end_ns <= tool.start_ns <= tool.end_ns <= chats[1].start_ns
    assert len(spans) == 4
    assert_one_trace_under(root, spans)
    assert all(s.status_code == UNSET for s in spans)
    # Content only on request: no question, thought, input or observation anywhere.
    assert not any(CONTENT_KEYS & s.attributes.keys() for s in spans)
    said = everything_said(spans)
    assert "17*23" not in said and "395" not in said and "calculator" not in said
    assert otlp.refused == []


async def test_the_standard_variables_for_headers_and_service_name_work(
    otlp: FakeOTLP, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As Langfuse asks for it: Basic auth, a space in the value, two headers.
    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_HEADERS",
        "Authorization=Basic cGstbGYtMTpzay1sZi0y,x-langfuse-ingestion-version=4",
    )
    monkeypatch.setenv("OTEL_SERVICE_NAME", "reactbot-staging")
    code, out = await ask(["What is 2+2?"], {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint})
    assert code == 0, out
    assert otlp.headers
    for headers in otlp.headers:
        assert headers["Authorization"] == "Basic cGstbGYtMTpzay1sZi0y"
        assert headers["x-langfuse-ingestion-version"] == "4"
        assert headers["Content-Type"] == "application/x-protobuf"
    assert run_span(otlp).resource["service.name"] == "reactbot-staging"


async def test_tool_calls_and_usage_through_openai_with_content_captured(
    otlp: FakeOTLP, fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path,
        f"""
        telemetry:
          otlp_endpoint: {otlp.endpoint}
          capture_content: true
        """,
    )
    fake.reply(
        "I will use the calculator.",
        tool_calls=[FakeToolCall("calculate", SIX_BY_SEVEN, argument_chunk_size=4)],
        usage=FakeUsage(30, 7, cached_tokens=10),
    )
    fake.reply("6*7 = 42.", reasoning=["The tool said ", "42."], usage=FakeUsage(50, 4))
    env = {"OPENAI_API_KEY": SECRET, "OPENAI_BASE_URL": fake.base_url, "REACTBOT_MODEL": "m-1"}
    question = f"What is 6*7? (my key is {SECRET})"
    code, out = await ask(["--mode", "tools", question], env, config=config)
    assert code == 0, out
    fake.assert_complete()
    spans = otlp.spans
    root = run_span(otlp)
    assert_one_trace_under(root, spans)
    assert root.attributes["gen_ai.provider.name"] == "openai"
    assert root.attributes["gen_ai.usage.input_tokens"] == 80
    assert root.attributes["gen_ai.usage.output_tokens"] == 11
    (asked,) = json.loads(root.attributes["gen_ai.input.messages"])
    assert asked["role"] == "user"
    assert asked["parts"] == [{"type": "text", "content": f"What is 6*7? (my key is {REDACTED})"}]
    (answered,) = json.loads(root.attributes["gen_ai.output.messages"])
    assert answered == {
        "role": "assistant",
        "parts": [{"type": "text", "content": "6*7 = 42."}],
        "finish_reason": "stop",
    }

    first, second = otlp.named("chat m-1")
    host, port = fake.base_url.split("//")[1].split("/")[0].split(":")
    for chat in (first, second):
        assert chat.kind == CLIENT
        assert chat.attributes["gen_ai.provider.name"] == "openai"
        assert chat.attributes["gen_ai.request.model"] == "m-1"
        assert chat.attributes["server.address"] == host
        assert chat.attributes["server.port"] == int(port)
        assert chat.attributes["gen_ai.response.time_to_first_chunk"] > 0
    assert first.attributes["gen_ai.usage.input_tokens"] == 30
    assert first.attributes["gen_ai.usage.output_tokens"] == 7
    assert first.attributes["gen_ai.usage.cache_read.input_tokens"] == 10
    assert first.attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert second.attributes["gen_ai.usage.input_tokens"] == 50
    assert second.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    (thought,) = json.loads(first.attributes["gen_ai.output.messages"])
    assert thought["parts"] == [{"type": "text", "content": "I will use the calculator."}]
    assert thought["finish_reason"] == "tool_call"
    (answer,) = json.loads(second.attributes["gen_ai.output.messages"])
    assert answer["parts"] == [
        {"type": "reasoning", "content": "The tool said 42."},
        {"type": "text", "content": "6*7 = 42."},
    ]
    assert answer["finish_reason"] == "stop"

    tool = only(otlp.named("execute_tool calculate"))
    assert tool.attributes["gen_ai.tool.call.id"] == "call_0"
    assert tool.attributes["gen_ai.tool.call.arguments"] == "6*7"  # the input, as the trace has it
    assert tool.attributes["gen_ai.tool.call.result"] == "42"
    assert first.end_ns <= tool.start_ns <= tool.end_ns <= second.start_ns

    assert SECRET not in everything_said(spans)


async def test_a_tool_error_and_a_failed_model_call_set_error_status(
    otlp: FakeOTLP, fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path,
        f"""
        model:
          max_retries: 0
        telemetry:
          otlp_endpoint: {otlp.endpoint}
        """,
    )
    fake.reply("Thought: I will use a tool that does not exist.\nAction: nosuch[x]")
    fake.error(503, "The engine is overloaded.")
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": fake.base_url, "REACTBOT_MODEL": "m"}
    code, out = await ask(["Anything?"], env, config=config)
    assert code == 1, out
    fake.assert_complete()
    spans = otlp.spans
    root = run_span(otlp)
    assert_one_trace_under(root, spans)
    tool = only(otlp.named("execute_tool nosuch"))
    assert tool.status_code == ERROR
    assert tool.attributes["error.type"] == "unknown_tool"
    assert tool.status_message == ""  # the observation is content: not captured
    ok, failed = otlp.named("chat m")
    assert ok.status_code == UNSET and "error.type" not in ok.attributes
    assert failed.status_code == ERROR
    assert failed.attributes["error.type"] == "unavailable"
    assert "503" in failed.status_message
    assert root.status_code == ERROR
    assert root.attributes["error.type"] == "model"
    assert root.attributes["reactbot.run.status"] == "failed"
    assert root.status_message


def agent_with(tracer: Any, *, capture: bool, tool_timeout: float = 5.0) -> Agent:
    tools = ToolRegistry()

    async def slow(arg: str) -> str:
        await asyncio.sleep(30)
        return "never"

    async def huge(arg: str) -> str:
        return f"{SECRET} \ud800 " + "x" * 100_000  # a lone surrogate: JSON lets one in

    tools.add(FunctionTool("slow", slow, "Takes its time.", "slow[x]"))
    tools.add(FunctionTool("huge", huge, "Says a lot.", "huge[x]"))
    telemetry = Telemetry(
        tracer,
        Provider("reactbot.demo", in_process=True),
        capture=Capture(lambda text: text.replace(SECRET, "[secret]")) if capture else None,
    )
    model = ScriptedModel(
        [
            Turn("Thought: a lot.\nAction: huge[x]"),
            Turn("Thought: and slow.\nAction: slow[x]"),
            Turn("Thought: done.\nAnswer: ok"),
        ]
    )
    settings = AgentSettings(tool_timeout=tool_timeout)
    return Agent(model, tools, settings=settings, observers=[telemetry])


async def test_a_tool_timeout_is_an_error_and_captured_text_is_bounded(otlp: FakeOTLP) -> None:
    tracer, shutdown = start_tracing(traces_endpoint(otlp.endpoint))
    final = await agent_with(tracer, capture=True, tool_timeout=0.1).start("Go.").wait()
    await shutdown()
    assert final.trace.status == "answered"
    slow = only(otlp.named("execute_tool slow"))
    assert slow.status_code == ERROR
    assert slow.attributes["error.type"] == "timeout"
    assert "did not finish within" in slow.status_message  # captured: the reason is content
    huge = only(otlp.named("execute_tool huge"))
    assert huge.status_code == UNSET
    result = huge.attributes["gen_ai.tool.call.result"]
    assert result.startswith("[secret] ? xxx") and SECRET not in result
    assert CONTENT_LIMIT < len(result) < CONTENT_LIMIT + 40
    assert result.endswith("more characters]")
    assert_one_trace_under(run_span(otlp), otlp.spans)


async def test_a_stopped_run_is_cancelled_not_failed(otlp: FakeOTLP) -> None:
    tracer, shutdown = start_tracing(traces_endpoint(otlp.endpoint))
    run = agent_with(tracer, capture=False).start("Go.")
    async for event in run.events():
        if isinstance(event, ObservationReady):  # the huge one: the slow tool is next
            await asyncio.sleep(0.05)
            run.cancel(by="ada")
    final = await run.wait()
    await shutdown()
    assert isinstance(final, Cancelled)
    root = run_span(otlp)
    assert root.status_code == UNSET and root.attributes["reactbot.cancelled"] is True
    assert root.attributes["reactbot.run.status"] == "cancelled"
    slow = only(otlp.named("execute_tool slow"))
    assert slow.status_code == UNSET and slow.attributes["reactbot.cancelled"] is True
    assert_one_trace_under(root, otlp.spans)


def run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_without_telemetry_no_opentelemetry_module_is_loaded_even_after_a_run() -> None:
    out = run_python(
        """
        import asyncio, sys
        from bot.app import App
        from bot.config import load_config

        async def main():
            app = App.create(load_config(None, {}))
            assert app.agent.observers == []
            final = await app.agent.start("What is 6*7?").wait()
            await app.aclose()
            return final.trace.status

        status = asyncio.run(main())
        print(status, sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"))
        """
    )
    assert out == "answered []"


def test_configured_without_the_sdk_says_so_in_one_line_and_answers() -> None:
    out = run_python(
        """
        import asyncio, sys
        sys.modules["opentelemetry.sdk"] = None  # as if the otel extra were not installed
        sys.modules["opentelemetry.exporter"] = None
        from bot.app import App
        from bot.config import load_config

        async def main():
            config = load_config(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
            app = App.create(config)
            final = await app.agent.start("What is 6*7?").wait()
            await app.aclose()
            print(final.trace.status, app.agent.observers)
            print("\\n".join(n for n in app.notes if "Tracing" in n))

        asyncio.run(main())
        """
    )
    status, note = out.splitlines()
    assert status == "answered []"
    assert note.startswith("Tracing is off: ")
    assert "pip install 'reactbot[otel]'" in note


async def test_exit_waits_a_bounded_time_for_a_collector_that_is_down(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    tracer, shutdown = start_tracing(
        traces_endpoint(f"http://user:hunter22@127.0.0.1:{port}"), shutdown_seconds=0.5
    )
    final = await agent_with(tracer, capture=False, tool_timeout=0.05).start("Go.").wait()
    assert final.trace.status == "answered"  # tracing never changes how a run ends
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="bot.telemetry"):
        await shutdown()
    assert time.monotonic() - started < 5.0  # bounded by shutdown_seconds, not the retries
    (said,) = [r.getMessage() for r in caplog.records if r.name == "bot.telemetry"]
    assert f"the collector at 127.0.0.1:{port} did not take the last spans within 0.5 s" in said
    assert "hunter22" not in caplog.text


async def test_serve_sends_a_slack_runs_spans_when_it_stops(tmp_path: Path, otlp: FakeOTLP) -> None:
    """``reactbot serve`` in its own process: a question asked in Slack becomes a trace, and
    the spans still queued when SIGTERM comes (batches are due only every minute here) are sent
    before the process exits."""
    from tests.integration.test_hostile_serve import (
        SIGNING_SECRET,
        ask_form,
        serving,
        slack_post,
    )
    from tests.integration.test_serve import free_port, wait_for_http
    from tests.integration.test_slack_app import eventually

    port = free_port()
    async with FakeSlack(token="xoxb-serve") as fake:
        fake.channel_members["C1GENERAL"] = ["U1ADA"]
        config = (
            f"slack:\n  mode: http\n  port: {port}\n  api_base_url: {fake.base_url}\n"
            "  update_interval: 0.25\n  cooldown_seconds: 0\n"
        )
        env = {
            "SLACK_BOT_TOKEN": "xoxb-serve",
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "60000",
        }
        async with serving(tmp_path, config, env, "slack"):
            await wait_for_http(f"http://127.0.0.1:{port}/healthz")
            await slack_post(
                f"http://127.0.0.1:{port}/slack/events", ask_form(fake, "What is 6*7?", 1)
            )
            await eventually(lambda: bool(fake.uploads), within=60)  # the trace, in the thread
            assert otlp.spans == []  # still queued in the bot
    root = run_span(otlp)
    assert root.attributes["reactbot.run.status"] == "answered"
    assert root.attributes["gen_ai.conversation.id"]
    assert_one_trace_under(root, otlp.spans)
    assert otlp.named("execute_tool calculate")
