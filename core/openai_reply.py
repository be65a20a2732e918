"""``Reply``: one streamed chat completion, from its decoded JSON chunks to ``ModelChunk``s.

Pure (no I/O, no clock). Each chunk is the dict ``json.loads`` made of one SSE event's data,
read as it stands: building the ``openai`` SDK's pydantic model of every chunk cost thirty
times the ``json.loads`` it follows (146 µs against 5), and nearly all of a chunk is a few
characters of text. A provider's stream is data from outside, so every field is checked for
its type: a field of the wrong type counts as absent, and a chunk that is not a JSON object
raises ``MalformedChunk``.

What comes out: text; reasoning text (``delta.reasoning_content`` from DeepSeek and Qwen,
``delta.reasoning`` from vLLM and OpenRouter, or ``<think>...</think>`` inside the content,
split by ``ThinkSplitter``); a refusal (``delta.refusal``); tool-call deltas as they come
(assembled by index by the step format); the finish reason; and the usage, once, at the end.
"""

from __future__ import annotations

import json
import json.scanner
from typing import Any, cast

from core.errors import MalformedChunk
from core.llm import ModelChunk, ToolCallDelta, Usage

__all__ = ["MalformedChunk", "Reply", "ThinkSplitter", "parse_json"]

_scan = json.scanner.make_scanner(cast(Any, json.JSONDecoder()))  # typeshed wants a scanner


def parse_json(data: str) -> Any:
    """``json.loads(data)``, a quarter cheaper for what nearly every chunk is, one JSON value
    with nothing around it: the scanner ``json.loads`` ends in is called straight, without
    the two whitespace matches its wrapper makes around it. Anything else (whitespace,
    trailing bytes, not JSON) goes to ``json.loads``, which decides (a property test holds
    the two equal)."""
    try:
        value, end = _scan(data, 0)
    except StopIteration:
        return json.loads(data)
    return value if end == len(data) else json.loads(data)


class Reply:
    """One reply's chunks as ``ModelChunk``s; only chunks that carry something come out.

    Usage comes once, at the end (some servers repeat a cumulative figure on every chunk:
    the last one counts). The reply's id and model go on the first piece that carries
    anything: a chunk of its own would count as the reply begun, and end the retries before
    any text."""

    __slots__ = ("_meta", "_named", "_splitter", "_usage")

    def __init__(self) -> None:
        self._splitter = ThinkSplitter()
        self._usage: Usage | None = None
        self._named = False
        self._meta: tuple[str, str] | None = None

    def text_of(self, chunk: Any) -> str | None:
        """The text of the commonest chunk by far, a piece of text and nothing else, when
        ``translate`` would give it back as it is (no id to carry, no usage, no tag of the
        splitter's can begin in it); None for any other chunk, which ``translate`` reads.
        No piece is made: the caller joins the text of a read's chunks into one."""
        if type(chunk) is not dict or self._meta is not None or chunk.get("usage"):
            return None
        if not self._named and _meta(chunk) is not None:
            return None
        choices = chunk.get("choices")
        if type(choices) is not list or not choices:
            return None
        choice = choices[0]
        if type(choice) is not dict or choice.get("finish_reason"):
            return None
        delta = choice.get("delta")
        if type(delta) is not dict or len(delta) != 1:
            return None
        content = delta.get("content")
        if type(content) is not str or not content or "<" in content:
            return None
        return content if self._splitter.idle else None

    def translate(self, chunk: Any) -> list[ModelChunk]:
        if type(chunk) is not dict:
            raise MalformedChunk(f"a streamed chunk is a {type(chunk).__name__}, not an object")
        if not self._named and self._meta is None:
            self._meta = _meta(chunk)
        usage = chunk.get("usage")
        if usage and type(usage) is dict:
            self._usage = _usage(usage)
        choices = chunk.get("choices")
        if not choices or type(choices) is not list:
            return []
        choice = choices[0]  # we never ask for n > 1
        if type(choice) is not dict:
            return []
        delta = choice.get("delta")
        if type(delta) is not dict:
            delta = {}
        content = delta.get("content")
        if len(delta) == 1 and type(content) is str and content and not choice.get("finish_reason"):
            # the commonest chunk by far: a piece of text and nothing else
            splitter = self._splitter
            if splitter.idle and "<" not in content:  # no <think> tag can begin here
                pieces = [ModelChunk(content)]
            else:
                pieces = splitter.feed(content)
        else:
            pieces = self._pieces(delta, choice.get("finish_reason"))
        if self._meta is not None and pieces:
            pieces[0].response_id, pieces[0].response_model = self._meta
            self._meta, self._named = None, True
        return pieces

    def _pieces(self, delta: dict[str, Any], finish: object) -> list[ModelChunk]:
        pieces = []
        reasoning = _reasoning(delta)
        if reasoning:
            pieces.append(ModelChunk(reasoning=reasoning))
        content = _text(delta.get("content"))
        if content:
            pieces.extend(self._splitter.feed(content))
        refusal = _text(delta.get("refusal"))
        if refusal:
            pieces.append(ModelChunk(refusal=refusal))
        calls = delta.get("tool_calls")
        if calls and type(calls) is list:
            deltas = tuple(d for d in map(_tool_call, calls) if d is not None)
            if deltas:
                pieces.append(ModelChunk(tool_calls=deltas))
        if finish and type(finish) is str:
            pieces.append(ModelChunk(finish=finish))
        return pieces

    def close(self) -> list[ModelChunk]:
        """What the reply's end completes: text held back by the splitter, then the usage."""
        pieces = self._splitter.close()
        if self._usage is not None:
            pieces.append(ModelChunk(usage=self._usage))
        if self._meta is not None:
            pieces = pieces or [ModelChunk()]
            pieces[0].response_id, pieces[0].response_model = self._meta
        return pieces


def _text(value: object) -> str:
    return value if type(value) is str else ""


def _count(value: object) -> int:
    return value if type(value) is int and value > 0 else 0


def _meta(chunk: dict[str, Any]) -> tuple[str, str] | None:
    reply_id, model = _text(chunk.get("id")), _text(chunk.get("model"))
    return (reply_id, model) if reply_id or model else None


def _reasoning(delta: dict[str, Any]) -> str:
    # Not OpenAI's: DeepSeek/Qwen send ``reasoning_content``, vLLM/OpenRouter ``reasoning``.
    for key in ("reasoning_content", "reasoning"):
        value = delta.get(key)
        if type(value) is str and value:
            return value
    return ""


def _tool_call(call: object) -> ToolCallDelta | None:
    if type(call) is not dict:
        return None
    index = call.get("index")
    function = call.get("function")
    if type(function) is not dict:
        function = {}
    call_id, name = call.get("id"), function.get("name")
    return ToolCallDelta(
        index=index if type(index) is int else 0,
        id=call_id if type(call_id) is str else None,
        name=name if type(name) is str else None,
        arguments=_text(function.get("arguments")),
    )


def _usage(usage: dict[str, Any]) -> Usage:
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if type(details) is dict else 0
    if not cached:
        cached = _count(usage.get("prompt_cache_hit_tokens"))  # DeepSeek's own field
    return Usage(
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        cached_tokens=cached,
    )


class ThinkSplitter:
    """Moves ``<think>...</think>`` spans of streamed content into reasoning chunks.

    Pure (no I/O, no clock): ``feed(text)`` returns the chunks the text completes and
    ``close()`` flushes the rest. A tag may straddle chunks, so a tail that could be the start
    of a tag is held back until the next feed decides it.
    """

    _OPEN = "<think>"
    _CLOSE = "</think>"

    def __init__(self) -> None:
        self._buffer = ""
        self._inside = False
        self.idle = True
        """Outside any ``<think>`` span with nothing held back: text with no ``<`` in it is
        plain content as it stands (the check the caller makes for nearly every chunk)."""

    def feed(self, text: str) -> list[ModelChunk]:
        pieces = self._feed(text)
        self.idle = not self._buffer and not self._inside
        return pieces

    def _feed(self, text: str) -> list[ModelChunk]:
        self._buffer += text
        pieces: list[ModelChunk] = []
        while True:
            tag = self._CLOSE if self._inside else self._OPEN
            index = self._buffer.find(tag)
            if index < 0:
                break
            self._emit(pieces, self._buffer[:index])
            self._buffer = self._buffer[index + len(tag) :]
            self._inside = not self._inside
        keep = _partial_tag_length(self._buffer, tag)
        self._emit(pieces, self._buffer[: len(self._buffer) - keep])
        self._buffer = self._buffer[len(self._buffer) - keep :]
        return pieces

    def close(self) -> list[ModelChunk]:
        """Flush what was held back; an unterminated ``<think>`` stays reasoning."""
        pieces: list[ModelChunk] = []
        self._emit(pieces, self._buffer)
        self._buffer = ""
        self.idle = not self._inside
        return pieces

    def _emit(self, pieces: list[ModelChunk], text: str) -> None:
        if text:
            pieces.append(ModelChunk(reasoning=text) if self._inside else ModelChunk(text=text))


def _partial_tag_length(text: str, tag: str) -> int:
    """Length of the longest proper prefix of ``tag`` that ``text`` ends with."""
    for length in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:length]):
            return length
    return 0
