"""OpenTelemetry traces of runs, following the GenAI semantic conventions.

Off unless ``telemetry.otlp_endpoint`` (or ``OTEL_EXPORTER_OTLP_ENDPOINT``) is set; only then
does ``bot.app`` import this module, and with it the OpenTelemetry SDK. One run is one trace::

    invoke_agent reactbot      INTERNAL  the run, from its start to its final event
    ├── chat {model}           CLIENT    one request to the model (INTERNAL: the demo model)
    ├── execute_tool {name}    INTERNAL  one tool call, after any approval
    └── chat {model}

Names, kinds and attributes are those of the GenAI conventions (``gen-ai-spans.md``,
``gen-ai-agent-spans.md``): ``gen_ai.operation.name``, ``gen_ai.provider.name``,
``gen_ai.agent.name``, ``gen_ai.conversation.id``, ``gen_ai.request.model``,
``gen_ai.request.temperature`` / ``max_tokens`` / ``stop_sequences``, ``gen_ai.output.type``
(``json`` when the request asks for a JSON object), ``gen_ai.usage.input_tokens`` /
``output_tokens``, ``gen_ai.response.id`` / ``model`` / ``finish_reasons``,
``gen_ai.response.time_to_first_chunk``, ``gen_ai.tool.name`` / ``type`` / ``description``,
``gen_ai.tool.call.id``. A failure sets the span's status to ERROR and ``error.type``, on
every span one short snake_case word of a small set:

- a model call: the ``core.errors`` class without its ``Model`` (``timeout``,
  ``rate_limited``, ``auth_error``, ``bad_request``, ``response_format_refused``,
  ``unavailable``), ``internal`` for any other exception;
- a tool call: ``timeout``, ``unknown_tool`` or ``tool_error``;
- a run: the ``Failed`` kind (``timeout``, ``model``, ``deadline``, ``internal``, ``input``).

A run stopped by a person is not an error: its spans say ``reactbot.cancelled``.

Content (the question, thoughts, tool inputs, observations, the answer) goes into the
opt-in attributes ``gen_ai.input.messages``, ``gen_ai.output.messages``,
``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result`` only with
``telemetry.capture_content: true``, each text cut to ``CONTENT_LIMIT`` characters and with
every configured secret replaced. A chat span's output (its thought) is complete only once the
agent has read the reply, so with content captured that span is ended, with its own end time,
at the run's next call or at its end.

Names, ids and status descriptions from outside (a tool name is the model's word) are cut to
``NAME_LIMIT`` / ``STATUS_LIMIT`` characters, and every text sent is made encodable: one lone
surrogate would make the exporter drop a whole batch, other runs' spans with it.

Children name their parent explicitly (the run span's context), never through contextvars:
probes are called from the run's task and from the tasks of parallel tool calls.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, set_span_in_context

from core.errors import ReactbotError
from core.events import Cancelled, Failed, FinalEvent
from core.llm import Usage
from core.observe import ModelRequest
from core.trace import Trace, TraceStep

log = logging.getLogger(__name__)

AGENT_NAME = "reactbot"
SERVICE_NAME = "reactbot"
TRACES_PATH = "/v1/traces"
CONTENT_LIMIT = 8000
"""Characters of one captured text (a thought, an input, an observation, the answer)."""
NAME_LIMIT = 128
"""Characters of a name or id in a span name or attribute (a tool name is the model's word)."""
STATUS_LIMIT = 500
"""Characters of a span's status description."""
DESCRIPTION_LIMIT = 1000
"""Characters of a tool's description (an MCP server writes its own)."""
SHUTDOWN_SECONDS = 3.0
"""How long exit may wait for the last spans to reach the collector."""

DEMO_PROVIDER = "reactbot.demo"
"""``gen_ai.provider.name`` of the offline demo model: not a provider the conventions list,
so a custom value in the application's own namespace, as they allow."""
OPENAI_PROVIDER = "openai"
OPENAI_SERVER = ("api.openai.com", 443)

# Attribute names (GenAI semantic conventions, and error.type from the general ones).
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT = "gen_ai.agent.name"
CONVERSATION = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_STREAM = "gen_ai.request.stream"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_STOP = "gen_ai.request.stop_sequences"
OUTPUT_TYPE = "gen_ai.output.type"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
FINISH_REASONS = "gen_ai.response.finish_reasons"
FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
TOOL_NAME = "gen_ai.tool.name"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_DESCRIPTION = "gen_ai.tool.description"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
CANCELLED = "reactbot.cancelled"
RUN_ID = "reactbot.run.id"
RUN_STATUS = "reactbot.run.status"
RUN_STEPS = "reactbot.run.steps"

_FINISH = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content_filter",
    "tool_calls": "tool_call",
    "function_call": "tool_call",
}
"""OpenAI's finish reasons as the output-messages schema names them (others pass as they are)."""


@dataclass(frozen=True, slots=True)
class Capture:
    """How captured text is made safe: bounded, and with secrets replaced."""

    redact: Callable[[str], str]
    limit: int = CONTENT_LIMIT

    def text(self, text: str) -> str:
        # Redact the whole text, then cut: a cut first could leave part of a secret.
        text = self.redact(text)
        if len(text) > self.limit:
            text = text[: self.limit] + f"… [{len(text) - self.limit:,} more characters]"
        return encodable(text)


def encodable(text: str) -> str:
    """``text`` as protobuf can send it: a lone surrogate (``json.loads('"\\ud800"')``) would
    make the exporter drop the whole batch, every run's spans in it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def bounded(text: str, limit: int = NAME_LIMIT) -> str:
    """A name, id or message from outside, safe for a span name or attribute."""
    return encodable(text if len(text) <= limit else text[:limit] + "…")


@dataclass(frozen=True, slots=True)
class Provider:
    """Who answers the model calls, as the conventions name it and where it is."""

    name: str
    in_process: bool = False
    server: tuple[str, int] | None = None

    @classmethod
    def openai_compatible(cls, base_url: str | None) -> Provider:
        if base_url is None:
            return cls(OPENAI_PROVIDER, server=OPENAI_SERVER)
        parts = urlsplit(base_url)
        if not parts.hostname:
            return cls(OPENAI_PROVIDER)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(OPENAI_PROVIDER, server=(parts.hostname, port))


class Telemetry:
    """A ``RunObserver`` that turns each run into a trace of GenAI spans."""

    def __init__(
        self, tracer: Tracer, provider: Provider, *, capture: Capture | None = None
    ) -> None:
        self.tracer = tracer
        self.provider = provider
        self.capture = capture

    def start(self, trace: Trace) -> RunSpans:
        return RunSpans(self, trace)


class RunSpans:
    """The spans of one run (a ``RunProbe``)."""

    def __init__(self, telemetry: Telemetry, trace: Trace) -> None:
        self.telemetry = telemetry
        self.trace = trace
        self.capture = telemetry.capture
        self.shared: dict[str, Any] = {PROVIDER: telemetry.provider.name}
        if trace.conversation:
            self.shared[CONVERSATION] = bounded(trace.conversation)
        attributes: dict[str, Any] = {
            OPERATION: "invoke_agent",
            AGENT: AGENT_NAME,
            RUN_ID: trace.id,
            **self.shared,
        }
        if self.capture is not None:
            attributes[INPUT_MESSAGES] = _messages("user", [_text(self.capture, trace.question)])
        self.span = telemetry.tracer.start_span(
            f"invoke_agent {AGENT_NAME}",
            context=Context(),  # a root: runs never nest in whatever happens to be current
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )
        self.context = set_span_in_context(self.span)
        self._unfinished: ChatSpan | None = None

    def model_call(self, step: int, model: str, request: ModelRequest) -> ChatSpan:
        self._finish_chat()
        model = bounded(model)
        provider = self.telemetry.provider
        attributes: dict[str, Any] = {
            OPERATION: "chat",
            REQUEST_MODEL: model,
            REQUEST_STREAM: True,
            **self.shared,
            **request_attributes(request),
        }
        if provider.server is not None:
            attributes[SERVER_ADDRESS], attributes[SERVER_PORT] = provider.server
        span = self.telemetry.tracer.start_span(
            f"chat {model}",
            context=self.context,
            kind=SpanKind.INTERNAL if provider.in_process else SpanKind.CLIENT,
            attributes=attributes,
        )
        steps = self.trace.steps  # the agent opens the step's record before it asks the model
        record = steps[-1] if steps and steps[-1].index == step else None
        return ChatSpan(self, span, record)

    def tool_call(
        self, step: int, call_id: str | None, name: str, input: str, description: str
    ) -> ToolSpan:
        self._finish_chat()
        name = bounded(name)  # the model's word: any length, any text
        attributes: dict[str, Any] = {
            OPERATION: "execute_tool",
            TOOL_NAME: name,
            TOOL_TYPE: "function",  # every tool, MCP's too, is called as a function
            **self.shared,
        }
        if description:
            attributes[TOOL_DESCRIPTION] = bounded(description, DESCRIPTION_LIMIT)
        if call_id:
            attributes[TOOL_CALL_ID] = bounded(call_id)
        if self.capture is not None:
            attributes[TOOL_ARGUMENTS] = self.capture.text(input)
        span = self.telemetry.tracer.start_span(
            f"execute_tool {name}",
            context=self.context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )
        return ToolSpan(span, self.capture)

    def end(self, final: FinalEvent) -> None:
        self._finish_chat()
        trace, span = final.trace, self.span
        if trace.models:
            span.set_attribute(REQUEST_MODEL, bounded(trace.models[0]))
        if any(step.tokens is not None for step in trace.steps):  # the model reported usage
            span.set_attribute(INPUT_TOKENS, trace.prompt_tokens)
            span.set_attribute(OUTPUT_TOKENS, trace.completion_tokens)
        span.set_attribute(RUN_STATUS, trace.status)
        span.set_attribute(RUN_STEPS, trace.step_count)
        if isinstance(final, Failed):
            span.set_attribute(ERROR_TYPE, final.kind)
            span.set_status(Status(StatusCode.ERROR, bounded(final.reason, STATUS_LIMIT)))
        elif isinstance(final, Cancelled):
            span.set_attribute(CANCELLED, True)
        elif self.capture is not None:
            answer = _text(self.capture, final.answer)
            span.set_attribute(OUTPUT_MESSAGES, _messages("assistant", [answer], finish="stop"))
        span.end()

    def unfinished(self, chat: ChatSpan) -> None:
        """``chat`` has ended but waits for its step's text (content is captured)."""
        self._unfinished = chat

    def _finish_chat(self) -> None:
        if self._unfinished is not None:
            chat, self._unfinished = self._unfinished, None
            chat.finish()


class ChatSpan:
    """One model call (a ``ModelCallProbe``)."""

    def __init__(self, run: RunSpans, span: Span, record: TraceStep | None) -> None:
        self.run = run
        self.span = span
        self.record = record
        self.started = time.perf_counter()
        self.usage: Usage | None = None
        self.finishes: list[str] = []
        self.failed = False
        self.ended_ns = 0

    def first_chunk(self) -> None:
        self.span.set_attribute(FIRST_CHUNK, time.perf_counter() - self.started)

    def response(self, id: str, model: str) -> None:
        if id:
            self.span.set_attribute(RESPONSE_ID, bounded(id))
        if model:
            self.span.set_attribute(RESPONSE_MODEL, bounded(model))

    def chunk(self, usage: Usage | None, finish: str | None) -> None:
        if usage is not None:
            self.usage = usage
        if finish:
            self.finishes.append(finish)

    def end(self, error: BaseException | None) -> None:
        span = self.span
        if self.usage is not None:
            span.set_attribute(INPUT_TOKENS, self.usage.prompt_tokens)
            span.set_attribute(OUTPUT_TOKENS, self.usage.completion_tokens)
            if self.usage.cached_tokens:
                span.set_attribute(CACHE_READ_TOKENS, self.usage.cached_tokens)
        if self.finishes:
            span.set_attribute(FINISH_REASONS, [bounded(f) for f in self.finishes[-8:]])
        if isinstance(error, asyncio.CancelledError):
            span.set_attribute(CANCELLED, True)
        elif error is not None:
            self.failed = True
            span.set_attribute(ERROR_TYPE, model_error_type(error))
            span.set_status(Status(StatusCode.ERROR, bounded(str(error), STATUS_LIMIT)))
        self.ended_ns = time.time_ns()
        if self.run.capture is None or self.record is None:
            span.end(self.ended_ns)
        else:
            self.run.unfinished(self)

    def finish(self) -> None:
        """Adds the step's text as the output message, then ends the span when it ended."""
        capture, record = self.run.capture, self.record
        if capture is not None and record is not None and not self.failed:
            parts = []
            if record.reasoning:
                parts.append({"type": "reasoning", "content": capture.text(record.reasoning)})
            text = record.raw or record.thought
            if text:
                parts.append(_text(capture, text))
            if parts:
                finish = self.finishes[-1] if self.finishes else "stop"
                self.span.set_attribute(
                    OUTPUT_MESSAGES,
                    _messages("assistant", parts, finish=_FINISH.get(finish) or bounded(finish)),
                )
        self.span.end(self.ended_ns)


class ToolSpan:
    """One tool call (a ``ToolCallProbe``)."""

    def __init__(self, span: Span, capture: Capture | None) -> None:
        self.span = span
        self.capture = capture

    def end(self, text: str, error: bool) -> None:
        span = self.span
        if error and text == "cancelled":  # the agent's word for a run stopped mid-call
            span.set_attribute(CANCELLED, True)
        elif error:
            span.set_attribute(ERROR_TYPE, tool_error_type(text))
            # The observation is content: the status says what it is only when that is wanted.
            span.set_status(
                Status(StatusCode.ERROR, self.capture.text(text) if self.capture else None)
            )
        elif self.capture is not None:
            span.set_attribute(TOOL_RESULT, self.capture.text(text))
        span.end()


def request_attributes(request: ModelRequest) -> dict[str, Any]:
    """A chat span's attributes for what the request asked (those it says)."""
    attributes: dict[str, Any] = {}
    if request.temperature is not None:
        attributes[REQUEST_TEMPERATURE] = request.temperature
    if request.max_tokens is not None:
        attributes[REQUEST_MAX_TOKENS] = request.max_tokens
    if request.stop:
        attributes[REQUEST_STOP] = [encodable(s) for s in request.stop]
    if request.output == "json":
        attributes[OUTPUT_TYPE] = "json"
    return attributes


_WORD_START = re.compile(r"(?<!^)(?=[A-Z])")


def model_error_type(error: BaseException) -> str:
    """``error.type`` of a failed model call: ``ModelRateLimited`` -> ``rate_limited``,
    ``ResponseFormatRefused`` -> ``response_format_refused``; anything not raised on purpose
    (outside ``core.errors``' tree) -> ``internal``, as a run's kind says it."""
    if not isinstance(error, ReactbotError):
        return "internal"
    name = type(error).__name__.removeprefix("Model")
    return _WORD_START.sub("_", name).lower()


def tool_error_type(observation: str) -> str:
    """A low-cardinality ``error.type`` for a failed tool call, from the agent's own words."""
    if observation.startswith("Unknown action"):
        return "unknown_tool"
    if observation.startswith("Error: ") and " did not finish within " in observation:
        return "timeout"
    return "tool_error"


def _text(capture: Capture, text: str) -> dict[str, str]:
    return {"type": "text", "content": capture.text(text)}


def _messages(role: str, parts: list[dict[str, str]], *, finish: str | None = None) -> str:
    """One message in the conventions' JSON form (a string: the SDK takes no structures)."""
    message: dict[str, Any] = {"role": role, "parts": parts}
    if finish is not None:
        message["finish_reason"] = finish
    return json.dumps([message], ensure_ascii=False)


def traces_endpoint(base: str) -> str:
    """The OTLP/HTTP traces URL for a base URL, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` means it
    (a URL that already ends in ``/v1/traces`` is taken as it is)."""
    base = base.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


class _Exporter(OTLPSpanExporter):
    """Shut down at most once: exit may stop it early, before the provider does."""

    _stopped = False

    def shutdown(self) -> None:
        if not self._stopped:
            self._stopped = True
            super().shutdown()  # type: ignore[no-untyped-call]


def start_tracing(
    endpoint: str, *, shutdown_seconds: float = SHUTDOWN_SECONDS
) -> tuple[Tracer, Callable[[], Awaitable[None]]]:
    """A tracer that batches spans to ``endpoint`` over OTLP/HTTP (protobuf), and the
    coroutine function that flushes and shuts it down: exit waits at most
    ``shutdown_seconds`` for the collector, then drops what it did not take (and says so).

    The provider is this app's own, not the global one: nothing else in the process is
    traced by accident, and tests can build several apps. The standard variables for
    headers, timeouts, TLS and compression (``OTEL_EXPORTER_OTLP_*``) are read by the
    exporter; ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, when set, wins over ``endpoint``, and
    ``OTEL_SERVICE_NAME`` over ``reactbot``.
    """
    attributes: dict[str, str] = {}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = SERVICE_NAME
    provider = TracerProvider(resource=Resource.create(attributes), shutdown_on_exit=False)
    explicit = None if os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") else endpoint
    exporter = _Exporter(endpoint=explicit)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    where = urlsplit(exporter._endpoint).netloc.rpartition("@")[2]  # never the credentials

    async def shutdown() -> None:
        done = threading.Event()

        def flush_and_stop() -> None:
            try:
                provider.force_flush()  # it blocks until sent or given up (no timeout of its own)
                provider.shutdown()
            finally:
                done.set()

        # A daemon thread: a collector that does not answer cannot hold the process.
        threading.Thread(target=flush_and_stop, name="reactbot-traces-exit", daemon=True).start()
        if not await asyncio.to_thread(done.wait, shutdown_seconds):
            log.warning(
                "traces: the collector at %s did not take the last spans within %g s; "
                "they are dropped",
                where,
                shutdown_seconds,
            )
            exporter.shutdown()  # ends the exporter's retries at once

    return provider.get_tracer("reactbot"), shutdown
