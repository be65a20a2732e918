"""Values: tool names, Action Input text and JSON tool calls."""

from __future__ import annotations

import json
import re
from typing import Any

from core.parser.types import (
    _FINISH_NAMES,
    Action,
)

_BRACKETS = re.compile(r"[\[\]]")
_CALL_NAME = re.compile(r"[A-Za-z_][\w.\-]*")
_MAX_CALL_NAME = 64


# --- values: names, Action Input text and JSON tool calls ---------------------------------------

_BARE_NAME = re.compile(r"[\w.\- ]{1,48}")
_MAX_BARE_NAME_WORDS = 3
_NAME_KEYS = ("action", "name", "tool", "tool_name")
_INPUT_KEYS = ("action_input", "arguments", "input", "tool_input", "args", "parameters")


def _clean_name(raw: str) -> str:
    """``**Search**`` or `` `search` `` -> ``search``: models decorate names as they like."""
    return raw.strip().strip("`*\"'").strip().lower()


def _is_finish(name: str) -> bool:
    return name in _FINISH_NAMES


def _looks_like_tool_name(name: str) -> bool:
    """Reject prose after ``Action:`` ("I will search for it") that has no brackets."""
    return bool(_BARE_NAME.fullmatch(name)) and len(name.split()) <= _MAX_BARE_NAME_WORDS


def _whole_call(text: str) -> bool:
    """``name[...]`` and nothing else: the first bracket closes at the very end."""
    name = _CALL_NAME.match(text)
    if name is None or not text.startswith("[", name.end()):
        return False
    depth = 0
    for match in _BRACKETS.finditer(text, name.end()):
        depth += 1 if match.group() == "[" else -1
        if depth == 0:
            return match.end() == len(text)
    return False


def _strip_fence(text: str) -> str:
    if not text.startswith("```"):
        return text
    body = text.split("\n", 1)[1] if "\n" in text else ""
    return body.split("```", 1)[0].strip()


def _argument_text(value: Any) -> str:
    """An input as the model wrote it: one string as itself, anything else as JSON. An object
    stays an object, even with one key: only the tool knows whether it takes one plain string
    (``core.acting.Tools.text_action`` reads ``{"query": "x"}`` as ``x`` for such a tool)."""
    if value is None:
        return ""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            # OpenAI-style "arguments" is itself JSON-encoded text.
            try:
                decoded = json.loads(text)
            except ValueError:
                return text
            if isinstance(decoded, dict):
                return _argument_text(decoded)
        return text
    return json.dumps(value, ensure_ascii=False)


def _decode_action_input(raw: str) -> str:
    """The text after ``Action Input:`` up to the next label: JSON when it looks like JSON,
    the body of a fenced code block, else the plain text, all its lines kept."""
    text = _strip_fence(raw.strip())
    if text[:1] in ("{", '"', "["):
        try:
            value, end = json.JSONDecoder().raw_decode(text)
        except ValueError:
            return text
        if isinstance(value, str):
            return _argument_text(value)
        return text[:end]
    return text


def _json_tool_call(raw: str) -> Action | str | None:
    """A JSON tool call in ``raw``: an Action, the answer text for finish, or None."""
    start = raw.find("{")
    if start == -1:
        return None
    try:
        obj, _ = json.JSONDecoder().raw_decode(raw, start)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict):
        obj = obj["function"]
    name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), "")
    name = _clean_name(name)
    if not name:
        return None
    argument = _argument_text(next((obj[k] for k in _INPUT_KEYS if k in obj), None))
    return argument if _is_finish(name) else Action(name, argument)
