"""Step formats: how a mode asks the model for one step and reads the reply.

``Run`` drives any of them the same way (``FORMATS[mode].read(...)``) and never branches on
the mode. Each format says what its request carries and turns the model's stream into the
run's events (through the ``ReplyReader``) and a ``Reply``: the step it read, or why none.

- ``text``: ReAct text, read by ``core.parser.StreamParser`` as it streams;
- ``tools``: native tool calls (several per reply), the text before a call its Thought;
- ``json``: one JSON object per reply, its thought and answer streamed as they arrive. What a
  model's endpoint takes (``json_schema``, then ``json_object``) is remembered per model name
  (``core.modes.JsonFormats``); past both, the run goes on in text.

The prompt sections and correction messages per mode are ``core.prompt``'s.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from core import modes, prompt
from core.errors import ResponseFormatRefused
from core.events import AnswerDelta, Mode, Notice, ThoughtDelta
from core.llm import ChatModel, Message, ModelChunk
from core.modes import JsonFieldStreamer, JsonFormat, JsonFormats, ToolCall, ToolCallAssembler
from core.outbox import ReplyReader, TextDelta
from core.parser import ParseError, Step, StreamParser, ThoughtText
from core.tools import ToolRegistry
from core.tools.schema import tool_specs
from core.trace import TraceStep


@dataclass(slots=True)
class Reply:
    """One reply as a format read it: the step (None when the format was not followed, with
    ``error`` saying how), and the native tool calls that are the step's actions."""

    text: str
    step: Step | None
    error: str | None
    calls: list[ToolCall] = field(default_factory=list)
    refused: bool = False
    """The model declined (a refusal, not text): ``text`` is its refusal, the run's answer."""


@dataclass(slots=True)
class Request:
    """What one reading needs to know of its run."""

    n: int
    step: TraceStep
    messages: list[Message]
    model: ChatModel
    tools: ToolRegistry
    final: bool
    """The answer is due: offer no tools."""


class StepFormat(Protocol):
    name: Mode

    async def read(self, reader: ReplyReader, request: Request) -> Reply:
        """Ask ``request.model`` for one step and read its streamed reply."""
        ...

    def correction(self, reason: str) -> Message:
        """What the model is told when its reply did not follow the format."""
        ...

    def best_answer(self, max_steps: int) -> Message:
        """What the model is told when its steps ran out."""
        ...

    def final_answer(self, draft: str) -> Message:
        """What the answer model is told to rewrite the draft answer."""
        ...


class _Prompted:
    """The messages a format adds to the conversation, in its own words (``core.prompt``)."""

    name: Mode

    def correction(self, reason: str) -> Message:
        return prompt.correction_message(reason, self.name)

    def best_answer(self, max_steps: int) -> Message:
        return prompt.best_answer_message(max_steps, self.name)

    def final_answer(self, draft: str) -> Message:
        return prompt.final_answer_message(draft, self.name)


@contextlib.contextmanager
def interrupted_keeps(
    step: TraceStep, parts: list[str], thought: Callable[[str], str]
) -> Iterator[None]:
    """A reply cut off while it streams (Stop, Ctrl-C, a timeout, a dropped connection)
    leaves on the step what the model had sent: the text so far as ``raw`` and its thought.
    The trace then shows, and counts, the step the live message showed (in tools mode a
    short text is still held back from it, thought or answer; the trace keeps it too)."""
    try:
        yield
    except BaseException:
        text = "".join(parts)
        if text and not step.raw:
            step.raw = text
            step.thought = step.thought or thought(text)
        raise


def _text_thought(text: str) -> str:
    """The thought of a partial text-mode reply, as the stream showed it."""
    parser = StreamParser()
    return "".join(e.text for e in parser.feed(cut_at_stop(text)) if isinstance(e, ThoughtText))


def _json_thought(text: str) -> str:
    return "".join(t for name, t in JsonFieldStreamer().feed(text) if name == "thought")


class TextFormat(_Prompted):
    name: Mode = "text"

    async def read(self, reader: ReplyReader, request: Request) -> Reply:
        n, step, outbox = request.n, request.step, reader.outbox
        parser = StreamParser()
        parse = parser.feed  # bound once: it runs for every chunk
        parts: list[str] = []
        keep = parts.append
        stream = request.model.stream(request.messages, stop=prompt.STOP)
        # The commonest loop of all, written out rather than through consume's callback.
        with interrupted_keeps(step, parts, _text_thought):
            async with reader.reading(stream) as kick:
                async for chunk in stream:
                    kick(chunk.pause)
                    if chunk.notice or chunk.reasoning or chunk.usage is not None or chunk.refusal:
                        reader.absorb(n, step, chunk)
                    if chunk.text:
                        keep(chunk.text)
                        parsed = parse(chunk.text)
                        if parsed:
                            outbox.emit_parsed(n, parsed)
                        if parser.observed:  # a provider ignoring stop: the rest is invented
                            break
        outbox.emit_parsed(n, parser.close())
        raw = step.raw = cut_at_stop("".join(parts))
        if step.refusal:
            return refused(step)
        try:
            return Reply(raw, parser.result(), None)
        except ParseError as exc:
            return Reply(raw, None, str(exc))


class ToolsFormat(_Prompted):
    name: Mode = "tools"

    async def read(self, reader: ReplyReader, request: Request) -> Reply:
        n, step = request.n, request.step
        assembler = ToolCallAssembler()
        parts: list[str] = []
        finish: list[str] = []
        label = ContentLabel(n, reader.outbox.emit_text, answer_only=request.final)

        def on_chunk(chunk: ModelChunk) -> bool:
            if chunk.text:
                parts.append(chunk.text)
                label.text(chunk.text)
            if chunk.tool_calls:
                label.call()
                assembler.feed(chunk.tool_calls)
            if chunk.finish:
                finish.append(chunk.finish)
            return False

        tools = request.tools
        specs = tool_specs(tools) if not request.final and len(tools) else None
        stream = request.model.stream(request.messages, stop=(), tools=specs)
        with interrupted_keeps(step, parts, lambda text: text.strip()):
            await reader.consume(n, step, stream, on_chunk)
        label.end()
        content = "".join(parts).strip()
        step.raw = content
        calls = assembler.calls()
        if step.refusal and not calls:
            return refused(step)
        if calls:
            return Reply(content, Step(content or None, None, None), None, calls)
        if content:
            return Reply(content, Step(None, None, content), None)
        cut_off = finish and finish[-1] == "length"
        return Reply("", None, "the reply was cut off" if cut_off else "the reply is empty")


class JsonStepFormat(_Prompted):
    """``json`` mode; ``formats`` remembers, per model name, what its endpoint takes, and
    ``to_text`` switches the run to text mode once neither JSON format is taken."""

    name: Mode = "json"

    def __init__(self, formats: JsonFormats, to_text: Callable[[list[Message]], None]) -> None:
        self.formats = formats
        self.to_text = to_text

    async def read(self, reader: ReplyReader, request: Request) -> Reply:
        name = request.model.name
        while (json_format := self.formats.for_model(name)) is not None:
            try:
                return await self._attempt(reader, request, json_format)
            except ResponseFormatRefused:
                self._refused(reader, request, self.formats.refused(name, json_format))
        return await TextFormat().read(reader, request)

    async def _attempt(
        self, reader: ReplyReader, request: Request, json_format: JsonFormat
    ) -> Reply:
        n, emit_text = request.n, reader.outbox.emit_text
        streamer = JsonFieldStreamer()
        parts: list[str] = []

        def on_chunk(chunk: ModelChunk) -> bool:
            if chunk.text:
                parts.append(chunk.text)
                for name, text in streamer.feed(chunk.text):
                    emit_text(ThoughtDelta if name == "thought" else AnswerDelta, n, text)
            return False

        format_ = modes.response_format(json_format)
        stream = request.model.stream(request.messages, stop=(), response_format=format_)
        with interrupted_keeps(request.step, parts, _json_thought):
            await reader.consume(n, request.step, stream, on_chunk)
        text = "".join(parts)
        request.step.raw = text
        if request.step.refusal:
            return refused(request.step)
        try:
            return Reply(text, modes.json_step(text), None)
        except ParseError as exc:
            return Reply(text, None, str(exc))

    def _refused(self, reader: ReplyReader, request: Request, fallback: JsonFormat | None) -> None:
        """Say the fall back to ``fallback``, once; past ``json_object``, text mode."""
        if fallback == "json_object":
            text = "the model endpoint does not take JSON schemas; asking for a JSON object"
        else:
            self.to_text(request.messages)
            text = "the model endpoint does not take JSON output; answering in text mode"
        reader.trace.notices.append(text)
        reader.outbox.emit(Notice("info", text))


class ContentLabel:
    """Is a ``tools``-mode reply's text its Thought (a tool call follows) or its Answer (none
    does)? Only the end of the reply tells, so the text is held until a call starts (then it
    was the thought), or until it outgrows one short sentence (the prompt asks for one
    before a call; longer is the answer streaming), or until the reply ends (the answer)."""

    LONGEST_THOUGHT = 240

    def __init__(
        self, n: int, emit: Callable[[type[TextDelta], int, str], None], *, answer_only: bool
    ) -> None:
        self._n = n
        self._emit = emit
        self._held: list[str] = []
        self._size = 0
        self._kind: type[ThoughtDelta] | type[AnswerDelta] | None = (
            AnswerDelta if answer_only else None
        )

    def text(self, text: str) -> None:
        if self._kind is not None:
            self._emit(self._kind, self._n, text)
            return
        self._held.append(text)
        self._size += len(text)
        if self._size > self.LONGEST_THOUGHT:
            self._release(AnswerDelta)

    def call(self) -> None:
        if self._kind is None:
            self._release(ThoughtDelta)

    def end(self) -> None:
        if self._kind is None:
            self._release(AnswerDelta)

    def _release(self, kind: type[ThoughtDelta] | type[AnswerDelta]) -> None:
        self._kind = kind
        held = "".join(self._held)
        self._held.clear()
        if held.strip():
            self._emit(kind, self._n, held)


def refused(step: TraceStep) -> Reply:
    """The model declined in ``step``: its refusal is the step's answer, and nothing to
    re-ask (asking again would only get another refusal, or a different answer)."""
    text = step.refusal.strip()
    return Reply(text, Step(None, None, text), None, refused=True)


def assistant_message(reply: Reply) -> Message:
    """The model's reply as it goes back into the conversation (with its native calls)."""
    message: Message = {"role": "assistant", "content": reply.text}
    if reply.calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.calls
        ]
    return message


def cut_at_stop(text: str) -> str:
    """The reply up to the first stop marker (what a provider honouring ``stop`` sends)."""
    found = [at for marker in prompt.STOP if (at := text.find(marker)) != -1]
    return text[: min(found)] if found else text


def formats_for(
    json_formats: JsonFormats, to_text: Callable[[list[Message]], None]
) -> dict[Mode, StepFormat]:
    """One format per mode, for one run."""
    return {
        "text": TextFormat(),
        "tools": ToolsFormat(),
        "json": JsonStepFormat(json_formats, to_text),
    }
