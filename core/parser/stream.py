"""The stream parser: ``feed`` chunks, ``close``, ``result``; ``parse`` feeds it a whole reply."""

from __future__ import annotations

import enum

from core.parser.heads import (
    _ALL_LABELS,
    _HEAD_SCANS,
    _HEAD_SCANS_KEPT,
    _TEXT,
    _cut_stop,
    _HeadScan,
    _Label,
    _scan_head,
)
from core.parser.types import (
    _BLANKS,
    _MAX_HEAD,
    BAD_JSON_ACTION,
    EMPTY_ANSWER,
    EMPTY_REPLY,
    INPUT_WITHOUT_ACTION,
    NO_ACTION,
    NO_FINISH_ANSWER,
    NO_LABELS,
    NO_TOOL_NAME,
    NOT_A_TOOL_CALL,
    Action,
    ActionFound,
    AnswerText,
    ParseError,
    ParseEvent,
    Step,
    ThoughtText,
)
from core.parser.values import (
    _BRACKETS,
    _CALL_NAME,
    _MAX_CALL_NAME,
    _clean_name,
    _decode_action_input,
    _is_finish,
    _json_tool_call,
    _looks_like_tool_name,
    _whole_call,
)


def parse(text: str) -> Step:
    """Parse one complete reply; raises ParseError when it holds no action or answer."""
    parser = StreamParser()
    parser.feed(text)
    parser.close()
    return parser.result()


# --- the stream parser ---------------------------------------------------------------------------


class _State(enum.Enum):
    THOUGHT = enum.auto()  # also text before any label
    JSON = enum.auto()  # a line that opened with "{" or "```": maybe a JSON tool call
    ACTION_NAME = enum.auto()  # after "Action:", until "[" or the end of the line
    BARE_ACTION = enum.auto()  # "Action: name" with no bracket: waits for Action Input/Answer
    BRACKET = enum.auto()  # inside name[...]
    INPUT = enum.auto()  # after "Action Input:"
    ANSWER = enum.auto()  # after "Answer:" / "Final Answer:"
    CALL = enum.auto()  # a reply that opened with "name[" and no label: maybe only that call
    DONE = enum.auto()  # decided (or hit Observation): the rest is ignored


# Inside brackets only a hallucinated Observation ends the input: a multi-line answer may well
# contain a line starting with "Answer:". An answer ends when a new step starts.
_LABELS_IN_BRACKET = frozenset({_Label.OBSERVATION})
_LABELS_IN_ANSWER = frozenset({_Label.OBSERVATION, _Label.THOUGHT, _Label.ACTION})


class StreamParser:
    """Incremental ReAct parser: ``feed`` chunks, then ``close``, then ``result``.

    Pure: no I/O, no clock, no awaits. Events carry text as soon as it is known not to be
    part of a label; see the module docstring for the accepted shapes.
    """

    def __init__(self) -> None:
        self.observed = False
        """The reply went on to write an ``Observation:`` itself (a provider that ignores
        ``stop``): the step is decided, and the rest of the reply is not worth reading."""
        self._state = _State.THOUGHT
        self._events: list[ParseEvent] = []
        self._closed = False
        self._error: str | None = None
        self._saw_label = False
        self._saw_text = False
        # Line handling: the unresolved start of the current line, and the newline before it,
        # which belongs to the field only if this line turns out not to be a label.
        self._in_head = True
        self._head = ""
        self._newline_pending = False
        # Blanks between a label's colon and its value are not part of the value, even when
        # they arrive in separate chunks.
        self._value_start = False
        # Field contents.
        self._thought: list[str] = []
        self._answer: list[str] = []
        self._answer_done = False
        self._action: Action | None = None
        self._name_parts: list[str] = []
        self._name_has_text = False
        self._name = ""
        self._depth = 0
        self._bracket_input: list[str] = []
        self._bracket_held: list[str] = []
        self._input_parts: list[str] = []
        self._json_parts: list[str] = []
        self._json_from_thought = False
        # The reply's first words, held while they may be a bare "name[input]" call.
        self._call_parts: list[str] | None = []
        # Literal "\n" reads as a line break until the first real one (JSON-escaped text).
        self._unescaping = True
        self._held_backslash = False
        # From a backslash that may stand before a label, until that is decided.
        self._held_label = ""

    # public API

    def feed(self, chunk: str) -> list[ParseEvent]:
        if self._closed:
            raise RuntimeError("StreamParser.feed() called after close()")
        if self._unescaping and ("\\" in chunk or "\n" in chunk or self._held_backslash):
            chunk = self._unescape(chunk)
        if "\\" in chunk or self._held_label:
            chunk = self._label_breaks(chunk, final=False)
        return self._feed_text(chunk)

    def _feed_text(self, chunk: str) -> list[ParseEvent]:
        if not self._saw_text and chunk.strip():
            self._saw_text = True
        if not self._in_head and "\n" not in chunk:
            # Fast path: the middle of a line is the current field's text, as it comes.
            state = self._state
            if state is _State.THOUGHT and self._thought and chunk and not self._value_start:
                # The commonest chunk of all: more of a thought that has begun. Events are
                # only ever pending inside feed() and close(), so this chunk's is the only one.
                self._thought.append(chunk)
                return [ThoughtText(chunk, self._saw_label)]
            if (
                state is _State.BRACKET
                and self._answer
                and not self._bracket_held
                and "]" not in chunk
                and "[" not in chunk
                and not chunk.isspace()
            ):
                # The next commonest: more of a finish[...] answer that has begun.
                self._answer.append(chunk)
                return [AnswerText(chunk)]
            if state is not _State.DONE:
                self._text(chunk)
            return self._take_events()
        pos = 0
        # Once decided, only an invented "Observation:" is still looked for (line heads).
        while pos < len(chunk) and not self.observed:
            pos = self._feed_head(chunk, pos) if self._in_head else self._feed_body(chunk, pos)
        return self._take_events()

    def close(self) -> list[ParseEvent]:
        if self._closed:
            return []
        events: list[ParseEvent] = []
        if self._held_backslash:  # a lone backslash at the very end is just that
            self._held_backslash = self._unescaping = False
            events += self.feed("\\")
        if self._held_label:
            events += self._feed_text(self._label_breaks("", final=True))
        if self._in_head and self._head and self._state is not _State.DONE:
            if self._newline_pending and _cut_stop(self._head):
                self._head, self._newline_pending = "", False  # the stop sequence's remains
            else:
                self._resolve_head(self._scan_current_head(final=True))
        self._finalize()
        self._closed = True
        return events + self._take_events()

    def result(self) -> Step:
        if not self._closed:
            raise RuntimeError("StreamParser.result() called before close()")
        if self._error is not None:
            raise ParseError(self._error)
        thought = "".join(self._thought).strip() or None
        if self._action is None and not self._answer_done:
            raise ParseError(self._missing_message())
        answer = "".join(self._answer).strip() if self._answer_done else None
        return Step(thought=thought, action=self._action, answer=answer)

    # JSON-escaped text, and labels after a backslash

    def _label_breaks(self, chunk: str, *, final: bool) -> str:
        """A backslash right before a label (``Thought: x\\Answer: 4``, what is left of an
        escaped line break) as the line break it stands for; any other backslash as itself,
        and a doubled one (an escaped backslash) too. The text from a backslash is held while
        what follows may still be a label (at most ``_MAX_HEAD`` characters), so the decision
        does not depend on the chunking."""
        text, self._held_label = self._held_label + chunk, ""
        out: list[str] = []
        pos = 0
        while (at := text.find("\\", pos)) != -1:
            line = text[at + 1 : at + 1 + _MAX_HEAD]
            newline = line.find("\n")
            complete = final or newline != -1 or len(line) == _MAX_HEAD
            line = line[:newline] if newline != -1 else line
            # Only the first backslash of a run can start a label: never one after another.
            doubled = at > 0 and text[at - 1] == "\\"
            scan = (
                _TEXT
                if doubled
                else _scan_head(line, labels=_ALL_LABELS, json_ok=False, final=complete)
            )
            if scan.kind == "more":
                out.append(text[pos:at])
                self._held_label = text[at:]
                pos = len(text)
                break
            out.append(text[pos:at] + "\n" if scan.kind == "label" else text[pos : at + 1])
            pos = at + 1
        out.append(text[pos:])
        return "".join(out)

    def _unescape(self, chunk: str) -> str:
        """Literal ``\\n`` as a line break, up to the first real one (then never again): a
        decision that depends on the text before it only, so any chunking reads alike."""
        if not self._held_backslash and "\\" not in chunk:  # a line break, no backslash
            self._unescaping = False
            return chunk
        if self._held_backslash:
            chunk = "\\" + chunk
            self._held_backslash = False
        newline = chunk.find("\n")
        if newline != -1:
            self._unescaping = False
            return chunk[:newline].replace("\\n", "\n") + chunk[newline:]
        if chunk.endswith("\\"):  # maybe the first half of "\\n"
            self._held_backslash = True
            chunk = chunk[:-1]
        return chunk.replace("\\n", "\n")

    # reading lines

    def _feed_head(self, chunk: str, pos: int) -> int:
        room = _MAX_HEAD - len(self._head)
        newline = chunk.find("\n", pos, pos + room)
        end = newline if newline != -1 else min(len(chunk), pos + room)
        head = self._head = self._head + chunk[pos:end]
        # _head_rules, inline: this runs for every chunk that meets a line start.
        state = self._state
        if state is _State.BRACKET or state is _State.DONE:
            labels, json_ok = _LABELS_IN_BRACKET, False  # only Observation
        elif state is _State.ANSWER:
            labels, json_ok = _LABELS_IN_ANSWER, False
        else:
            labels = _ALL_LABELS
            json_ok = state is _State.THOUGHT or (
                state is _State.ACTION_NAME and not self._name_has_text
            )
        final = newline != -1
        key = (head, labels, json_ok, final)
        scan = _HEAD_SCANS.get(key)
        if scan is None:
            scan = _scan_head(head, labels=labels, json_ok=json_ok, final=final)
            if len(_HEAD_SCANS) >= _HEAD_SCANS_KEPT:
                _HEAD_SCANS.clear()
            _HEAD_SCANS[key] = scan
        if scan.kind == "more":
            if len(self._head) < _MAX_HEAD:
                return end
            scan = _TEXT
        self._resolve_head(scan)
        return end

    def _feed_body(self, chunk: str, pos: int) -> int:
        newline = chunk.find("\n", pos)
        if newline == -1:
            self._text(chunk[pos:])
            return len(chunk)
        self._text(chunk[pos:newline])
        self._in_head = True
        self._newline_pending = True
        return newline + 1

    def _scan_current_head(self, *, final: bool) -> _HeadScan:
        labels, json_ok = self._head_rules()
        return _scan_head(self._head, labels=labels, json_ok=json_ok, final=final)

    def _head_rules(self) -> tuple[frozenset[_Label], bool]:
        """Which labels end the current field, and whether a JSON tool call may start here."""
        if self._state is _State.BRACKET or self._state is _State.DONE:
            return _LABELS_IN_BRACKET, False
        if self._state is _State.ANSWER:
            return _LABELS_IN_ANSWER, False
        json_ok = self._state is _State.THOUGHT or (
            self._state is _State.ACTION_NAME and not self._name_has_text
        )
        return _ALL_LABELS, json_ok

    def _resolve_head(self, scan: _HeadScan) -> None:
        head, self._head, self._in_head = self._head, "", False
        if scan.kind == "label":
            assert scan.label is not None
            self._newline_pending = False
            self._saw_label = True
            self._value_start = True
            self._label(scan.label)
            if scan.end < len(head):  # _text("") would do nothing
                self._text(head[scan.end :])
            return
        if self._newline_pending:
            self._newline_pending = False
            self._newline()
        if scan.kind == "json":
            self._start_json(from_thought=self._state is _State.THOUGHT)
        self._text(head)

    # dispatch by state

    def _text(self, text: str) -> None:
        """Text inside one line (never a newline) for the current field."""
        if self._value_start:
            text = text.lstrip(_BLANKS)
            self._value_start = not text
        if not text:
            return
        state = self._state
        if state is _State.THOUGHT:
            self._emit_thought(text)
        elif state is _State.JSON:
            self._json_parts.append(text)
        elif state is _State.ACTION_NAME:
            self._action_name_text(text)
        elif state is _State.BRACKET:
            self._bracket_text(text)
        elif state is _State.INPUT:
            self._input_parts.append(text)
        elif state is _State.ANSWER:
            self._emit_answer(text)
        elif state is _State.CALL:
            self._call_text(text)
        # BARE_ACTION: chatter between "Action: x" and "Action Input:" is dropped; DONE: ignored.

    def _newline(self) -> None:
        self._value_start = False
        state = self._state
        if state is _State.THOUGHT:
            self._emit_thought("\n")
        elif state is _State.JSON:
            self._json_parts.append("\n")
        elif state is _State.ACTION_NAME:
            if self._name_has_text:
                self._start_bare_action()
        elif state is _State.BRACKET:
            self._bracket_content("\n")
        elif state is _State.INPUT:
            self._input_parts.append("\n")
        elif state is _State.ANSWER:
            self._emit_answer("\n")
        elif state is _State.CALL:
            self._call_text("\n")

    def _label(self, label: _Label) -> None:
        if label is _Label.OBSERVATION:
            # The model invented the tool's result: nothing from here on is real.
            self.observed = True
            self._finalize()
            return
        state = self._state
        if state is _State.CALL:
            self._give_up_call()
            state = self._state
        if state is _State.THOUGHT:
            self._label_in_thought(label)
        elif state is _State.JSON:
            self._label_in_json(label)
        elif state is _State.ACTION_NAME:
            if self._name_has_text:
                self._start_bare_action()
                self._label_after_bare_action(label)
            elif label is _Label.ANSWER:
                self._state = _State.ANSWER
            else:
                self._fail(NO_TOOL_NAME)
        elif state is _State.BARE_ACTION:
            self._label_after_bare_action(label)
        else:
            # BRACKET never sees these labels; INPUT and ANSWER end at the next label.
            self._finalize()

    def _finalize(self) -> None:
        """The current field has ended for good (a label that ends the step, or close())."""
        state = self._state
        self._state = _State.DONE
        if state is _State.JSON:
            self._finish_json()
        elif state is _State.ACTION_NAME:
            if self._name_has_text:
                self._start_bare_action()
                self._finish_bare_action()
            else:
                self._fail(NO_TOOL_NAME)
        elif state is _State.BARE_ACTION:
            self._finish_bare_action()
        elif state is _State.BRACKET:
            # Never closed: the last "]" still held back is taken as the closing one.
            self._bracket_held.clear()
            self._finish_bracket()
        elif state is _State.INPUT:
            self._finish_input()
        elif state is _State.ANSWER:
            self._finish_answer()
        elif state is _State.CALL:
            self._finish_call()

    # thought

    def _label_in_thought(self, label: _Label) -> None:
        if label is _Label.THOUGHT:
            if self._thought:  # (a first one has nothing to separate: _emit_thought would drop it)
                self._emit_thought("\n")  # a second Thought label separates paragraphs
        elif label is _Label.ACTION:
            self._start_action()
        elif label is _Label.ANSWER:
            self._state = _State.ANSWER
        else:
            self._fail(INPUT_WITHOUT_ACTION)

    def _emit_thought(self, text: str) -> None:
        if self._call_parts is not None and not self._saw_label:
            text = self._maybe_call(text)
            if not text:
                return
        if not self._thought:
            text = text.lstrip()  # the display should not start with the label's spacing
            if not text:
                return
        self._thought.append(text)
        self._events.append(ThoughtText(text, self._saw_label))

    # a bare "name[input]" reply

    def _maybe_call(self, text: str) -> str:
        """Hold the reply's first words while they may open a bare call; the text to show
        as thought once they cannot (all of it at once), else ""."""
        assert self._call_parts is not None
        self._call_parts.append(text)
        held = "".join(self._call_parts).lstrip()
        name = _CALL_NAME.match(held)
        if not held or (name and name.end() == len(held) and len(held) <= _MAX_CALL_NAME):
            return ""  # nothing yet, or a name still growing
        if name and held[name.end()] == "[":
            self._state = _State.CALL
            return ""
        self._call_parts = None
        return held

    def _call_text(self, text: str) -> None:
        assert self._call_parts is not None
        self._call_parts.append(text)

    def _give_up_call(self) -> None:
        """Not a bare call after all: what was held is the thought."""
        held = "".join(self._call_parts or ())
        self._call_parts = None
        self._state = _State.THOUGHT
        self._emit_thought(held)

    def _finish_call(self) -> None:
        held = "".join(self._call_parts or ()).strip()
        if not _whole_call(held):
            self._give_up_call()
            return
        self._call_parts = None
        call = StreamParser()  # the same text, labelled as the Action it is
        call._unescaping = False  # already read
        events = call.feed("Action: " + held) + call.close()
        self._events += events
        self._saw_label = True
        self._action, self._answer, self._answer_done = (
            call._action,
            call._answer,
            call._answer_done,
        )
        self._error = call._error
        self._state = _State.DONE

    # action name

    def _start_action(self) -> None:
        self._state = _State.ACTION_NAME
        self._name_parts.clear()
        self._name_has_text = False

    def _action_name_text(self, text: str) -> None:
        if not self._name_has_text and text.lstrip().startswith("{"):
            self._start_json(from_thought=False)
            self._text(text)
            return
        bracket = text.find("[")
        if bracket == -1:
            self._name_parts.append(text)
            self._name_has_text = self._name_has_text or bool(text.strip())
            return
        self._name_parts.append(text[:bracket])
        self._name = _clean_name("".join(self._name_parts))
        if not self._name:
            self._fail(NO_TOOL_NAME)
            return
        self._state = _State.BRACKET
        self._depth = 1
        self._text(text[bracket + 1 :])

    # name[input]

    def _bracket_text(self, text: str) -> None:
        if "]" not in text:  # the bracket cannot close in this text
            self._depth += text.count("[")
            self._bracket_content(text)
            return
        for match in _BRACKETS.finditer(text):
            self._depth += 1 if match.group() == "[" else -1
            if self._depth == 0:
                self._bracket_content(text[: match.start()])
                self._close_bracket()
                return
        self._bracket_content(text)

    def _bracket_content(self, text: str) -> None:
        """Input text; a trailing "]" is held back in case the bracket never balances."""
        if not text:
            return
        body = text.rstrip()
        if not body:
            self._bracket_held.append(text)
            return
        cut = len(body) - 1 if body.endswith("]") else len(text)
        self._emit_bracket_input("".join(self._bracket_held) + text[:cut])
        self._bracket_held = [text[cut:]] if cut < len(text) else []

    def _close_bracket(self) -> None:
        self._emit_bracket_input("".join(self._bracket_held))
        self._bracket_held.clear()
        self._state = _State.DONE
        self._finish_bracket()

    def _emit_bracket_input(self, text: str) -> None:
        if not text:
            return
        if _is_finish(self._name):
            self._emit_answer(text)
        else:
            self._bracket_input.append(text)

    def _finish_bracket(self) -> None:
        if _is_finish(self._name):
            self._finish_answer()
        else:
            self._found(Action(self._name, "".join(self._bracket_input).strip()))

    # Action: name / Action Input: ...

    def _start_bare_action(self) -> None:
        self._name = _clean_name("".join(self._name_parts))
        self._state = _State.BARE_ACTION

    def _label_after_bare_action(self, label: _Label) -> None:
        if label is _Label.INPUT:
            self._state = _State.INPUT
        elif label is _Label.ANSWER and _is_finish(self._name):
            self._state = _State.ANSWER
        else:
            self._finalize()

    def _finish_bare_action(self) -> None:
        if _is_finish(self._name):
            self._fail(NO_FINISH_ANSWER)
        elif not _looks_like_tool_name(self._name):
            self._fail(NOT_A_TOOL_CALL)
        else:
            self._found(Action(self._name, ""))

    def _finish_input(self) -> None:
        raw = "".join(self._input_parts)
        if _is_finish(self._name):
            self._emit_answer(_decode_action_input(raw))
            self._finish_answer()
        else:
            self._found(Action(self._name, _decode_action_input(raw)))

    # JSON tool calls

    def _start_json(self, *, from_thought: bool) -> None:
        self._state = _State.JSON
        self._json_from_thought = from_thought
        self._json_parts.clear()

    def _label_in_json(self, label: _Label) -> None:
        self._state = _State.DONE
        if self._finish_json():
            return
        if self._json_from_thought and self._error is None:
            # It was only a code block in the thought; the label is handled as in a thought.
            self._state = _State.THOUGHT
            self._label_in_thought(label)

    def _finish_json(self) -> bool:
        """Decide the held-back JSON block; True when it was a tool call."""
        raw = "".join(self._json_parts)
        call = _json_tool_call(raw)
        if isinstance(call, Action):
            self._found(call)
            return True
        if isinstance(call, str):
            self._emit_answer(call)
            self._finish_answer()
            return True
        if self._json_from_thought:
            self._emit_thought(raw)
        else:
            self._fail(BAD_JSON_ACTION)
        return False

    # answers and outcomes

    def _emit_answer(self, text: str) -> None:
        if not self._answer:
            text = text.lstrip()
            if not text:
                return
        self._answer.append(text)
        self._events.append(AnswerText(text))

    def _finish_answer(self) -> None:
        self._state = _State.DONE
        self._answer_done = True
        if not "".join(self._answer).strip():
            self._fail(EMPTY_ANSWER)

    def _found(self, action: Action) -> None:
        self._state = _State.DONE
        self._action = action
        self._events.append(ActionFound(action))

    def _fail(self, message: str) -> None:
        self._state = _State.DONE
        self._error = message

    def _missing_message(self) -> str:
        if not self._saw_text:
            return EMPTY_REPLY
        if not self._saw_label:
            return NO_LABELS
        return NO_ACTION

    def _take_events(self) -> list[ParseEvent]:
        events, self._events = self._events, []
        return events
