"""What the parser gives back: a Step, its Action, the streamed events, and why a reply failed."""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import ReactbotError


class ParseError(ReactbotError):
    """The reply holds no usable action or answer; the message says what is missing."""


@dataclass(frozen=True, slots=True)
class Action:
    name: str
    input: str


@dataclass(frozen=True, slots=True)
class Step:
    thought: str | None
    action: Action | None
    answer: str | None


# The two text events are made for nearly every chunk a model streams, and a frozen
# dataclass costs twice as much to build; nothing changes one once it is returned.
@dataclass(slots=True)
class ThoughtText:
    text: str
    labelled: bool = True
    """False for text before any label: it may turn out to be a reply with no usable
    format, so a display may hold it back until the reply says which it is."""


@dataclass(slots=True)
class AnswerText:
    text: str


@dataclass(frozen=True, slots=True)
class ActionFound:
    action: Action


ParseEvent = ThoughtText | AnswerText | ActionFound

EMPTY_REPLY = "the reply is empty"
NO_LABELS = "no Thought, Action or Answer label found in the reply"
NO_ACTION = "no Action or Answer found after the Thought"
NO_TOOL_NAME = "the Action has no tool name"
NO_FINISH_ANSWER = "the finish action has no answer"
EMPTY_ANSWER = "the final answer is empty"
NOT_A_TOOL_CALL = "the Action is not a tool call: expected name[input]"
BAD_JSON_ACTION = "the Action is neither name[input] nor a JSON tool call"
INPUT_WITHOUT_ACTION = "an Action Input came before any Action"

_FINISH_NAMES = frozenset({"finish", "final answer", "final_answer", "finalanswer", "answer"})

# Longest line start that may still be a label, with room for indentation and decoration
# ("  **Final Answer 12**：**"); past this a line is plain text.
_MAX_HEAD = 64
_BLANKS = " \t\u3000"
_COLONS = ":："
_MAX_STEP_DIGITS = 4
