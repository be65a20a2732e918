"""What the ``tools`` and ``json`` modes need beside the text parser: pure, no I/O, no clock.

- ``ToolCallAssembler``: native tool-call deltas, assembled by index (id and name usually
  first, arguments in fragments, several calls interleaved), in O(total length).
- ``JsonFieldStreamer``: the ``thought`` and ``answer`` strings of a JSON reply, decoded as
  they arrive, so the thought streams live while the object is still open; O(n).
- ``json_step``: a whole JSON reply as a ``core.parser.Step``, or ``ParseError`` saying why.
- The response formats of the ``json`` mode, strictest first.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from core.llm import ResponseFormat, ToolCallDelta
from core.parser import Action, ParseError, Step

JsonFormat = Literal["json_schema", "json_object"]

STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "thought": {"type": "string"},
        "action": {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "input": {"type": "string"}},
                    "required": ["name", "input"],
                    "additionalProperties": False,
                },
                {"type": "null"},
            ]
        },
        "answer": {"type": ["string", "null"]},
    },
    "required": ["thought", "action", "answer"],
    "additionalProperties": False,
}


def response_format(kind: JsonFormat) -> ResponseFormat:
    if kind == "json_object":
        return {"type": "json_object"}
    return {
        "type": "json_schema",
        "json_schema": {"name": "react_step", "strict": True, "schema": STEP_SCHEMA},
    }


class JsonFormats:
    """The strictest ``response_format`` each model took, remembered by model name.

    A capability belongs to the model it describes: when one endpoint refuses ``json_schema``,
    that model falls back to ``json_object`` (then to text), and every other model, in any
    channel, is still asked for ``json_schema``. One per Agent, shared by its runs."""

    def __init__(self) -> None:
        self._taken: dict[str, JsonFormat | None] = {}

    def for_model(self, name: str) -> JsonFormat | None:
        """The format to ask ``name`` for; None: it took no JSON format (answer in text)."""
        return self._taken.get(name, "json_schema")

    def refused(self, name: str, refused: JsonFormat) -> JsonFormat | None:
        """``name`` refused ``refused``: remember and return the next plainer format."""
        fallback: JsonFormat | None = "json_object" if refused == "json_schema" else None
        self._taken[name] = fallback
        return fallback


# ---- native tool calls ----------------------------------------------------------------------


@dataclass(slots=True)
class ToolCall:
    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass(slots=True)
class ToolCallAssembler:
    """Deltas in, whole calls out: a delta's id and name replace, its arguments append."""

    _calls: dict[int, ToolCall] = field(default_factory=dict)
    _arguments: dict[int, list[str]] = field(default_factory=dict)

    def feed(self, deltas: Iterable[ToolCallDelta]) -> None:
        for delta in deltas:
            call = self._calls.get(delta.index)
            if call is None:
                call = self._calls[delta.index] = ToolCall(delta.index)
                self._arguments[delta.index] = []
            if delta.id:
                call.id = delta.id
            if delta.name:
                call.name = delta.name  # some servers repeat it; the last one is the name
            if delta.arguments:
                self._arguments[delta.index].append(delta.arguments)

    def calls(self) -> list[ToolCall]:
        """The calls in index order, ids filled in where the provider sent none."""
        done = []
        for position, index in enumerate(sorted(self._calls)):
            call = self._calls[index]
            call.arguments = "".join(self._arguments[index])
            call.id = call.id or f"call_{position}"
            done.append(call)
        return done

    def __bool__(self) -> bool:
        return bool(self._calls)


# ---- JSON replies -----------------------------------------------------------------------------

_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_STREAMED = frozenset({"thought", "answer"})


class JsonFieldStreamer:
    """The top-level ``thought`` and ``answer`` string values of a JSON object, decoded as
    they stream: ``feed`` returns ``(field, text)`` pieces. Anything else is only scanned.

    A small state machine over characters (each looked at once): nesting depth, whether we
    are in a string, whether that string is a key at depth 1, and an escape in progress
    (``\\uXXXX`` with surrogate pairs, even split across chunks).
    """

    def __init__(self) -> None:
        self._depth = 0
        self._in_string = False
        self._string_is_key = False
        self._key: list[str] = []
        self._last_key = ""
        self._after_colon = False
        self._field: str | None = None  # the streamed field whose value we are inside
        self._escape: str | None = None  # the escape read so far, after the backslash
        self._high_surrogate: int | None = None

    def feed(self, chunk: str) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        piece: list[str] = []
        for char in chunk:
            if self._in_string:
                text = self._string_char(char)
                if text and self._field is not None:
                    piece.append(text)
                if not self._in_string and piece:  # the value ended: flush it
                    out.append((self._field or "", "".join(piece)))
                    piece = []
                if not self._in_string:
                    self._field = None
                continue
            self._structure_char(char)
        if piece and self._field is not None:
            out.append((self._field, "".join(piece)))
        return out

    def _structure_char(self, char: str) -> None:
        if char in "{[":
            self._depth += 1
            self._after_colon = False
        elif char in "}]":
            self._depth -= 1
        elif char == ":":
            self._after_colon = True
        elif char == ",":
            self._after_colon = False
        elif char == '"':
            self._in_string = True
            self._string_is_key = self._depth == 1 and not self._after_colon
            self._key = []
            if self._depth == 1 and self._after_colon and self._last_key in _STREAMED:
                self._field = self._last_key

    def _string_char(self, char: str) -> str:
        """One character inside a string; returns the decoded text it completes."""
        if self._escape is not None:
            return self._escaped(char)
        if char == "\\":
            self._escape = ""
            return ""
        if char == '"':
            self._in_string = False
            if self._string_is_key:
                self._last_key = "".join(self._key)
            return ""
        if self._string_is_key:
            if len(self._key) < 32:
                self._key.append(char)
            return ""
        return char

    def _escaped(self, char: str) -> str:
        assert self._escape is not None
        if self._escape == "":
            if char != "u":
                self._escape = None
                return self._text(_ESCAPES.get(char, char))
            self._escape = "u"
            return ""
        self._escape += char
        if len(self._escape) < 5:
            return ""
        digits, self._escape = self._escape[1:], None
        try:
            code = int(digits, 16)
        except ValueError:
            return self._text("\ufffd")
        return self._code_point(code)

    def _code_point(self, code: int) -> str:
        if 0xD800 <= code < 0xDC00:  # a high surrogate: wait for its pair
            lone = self._high_surrogate
            self._high_surrogate = code
            return "\ufffd" if lone is not None else ""
        if 0xDC00 <= code < 0xE000 and self._high_surrogate is not None:
            high, self._high_surrogate = self._high_surrogate, None
            return chr(0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00))
        return self._text(chr(code) if not 0xD800 <= code < 0xE000 else "\ufffd")

    def _text(self, text: str) -> str:
        if self._high_surrogate is not None:  # a high surrogate that no pair followed
            self._high_surrogate = None
            text = "\ufffd" + text
        if self._string_is_key:
            if len(self._key) < 32:
                self._key.append(text)
            return ""
        return text


def json_step(text: str) -> Step:
    """A whole JSON reply as a Step; ``ParseError`` says what is wrong with it."""
    body = text.strip()
    if body.startswith("```"):  # json_object mode: some models still fence it
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    if not body.strip():
        raise ParseError("the reply is empty")
    try:
        value = json.loads(body)
    except ValueError as exc:
        raise ParseError(f"the reply is not valid JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise ParseError("the reply is not a JSON object")
    thought = value.get("thought")
    thought = thought.strip() if isinstance(thought, str) else None
    answer = value.get("answer")
    action = value.get("action")
    if isinstance(answer, str) and answer.strip():
        return Step(thought or None, None, answer.strip())
    if isinstance(action, dict):
        name = action.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ParseError("the action has no tool name")
        argument = action.get("input", "")
        if not isinstance(argument, str):
            argument = json.dumps(argument, ensure_ascii=False)
        if name.strip().lower() == "finish":
            if not argument.strip():
                raise ParseError("the final answer is empty")
            return Step(thought or None, None, argument.strip())
        return Step(thought or None, Action(name.strip().lower(), argument.strip()), None)
    raise ParseError("the reply has neither an action nor an answer")
