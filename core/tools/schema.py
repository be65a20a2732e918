"""Tool inputs: the JSON schema each tool takes, how it is shown and how input is checked.

A tool either takes one string (``name[input]``, the built-ins) or declares ``parameters``, a
JSON schema of an object (``name[{"a": 1, "b": "x"}]``). Every tool has a schema for the
native modes: a string tool's is an object with one string property (``input_name``, by
default ``input``). Whatever the mode, ``tool_input`` turns what the model wrote into what
``Tool.run`` receives (the string, or the object as canonical JSON text) or raises
``ToolError`` naming the field that is wrong, which becomes the Observation.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from core.errors import ToolError
from core.llm import ToolSpec
from core.tools.base import Tool

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

# jsonschema is imported where a schema is first checked: it is a large share of a CLI
# start-up (bench/startup.py), and the built-in tools, which take one string, never need it.

Schema = dict[str, Any]

MAX_ARGUMENTS = 100_000
"""Characters of JSON arguments accepted; a model stuck in a loop writes megabytes."""


def parameters_of(tool: Tool) -> Schema | None:
    """The tool's declared object schema, or None for a one-string tool."""
    schema = getattr(tool, "parameters", None)
    return schema if isinstance(schema, dict) else None


def input_name(tool: Tool) -> str:
    """The property that holds a one-string tool's input in the native modes."""
    name = getattr(tool, "input_name", None)
    return name if isinstance(name, str) and name else "input"


def schema_of(tool: Tool) -> Schema:
    """The object schema of the tool's arguments, declared or implied."""
    declared = parameters_of(tool)
    if declared is not None:
        return declared
    name = input_name(tool)
    return {
        "type": "object",
        "properties": {name: {"type": "string", "description": f"For example: {tool.example}"}},
        "required": [name],
        "additionalProperties": False,
    }


def tool_spec(tool: Tool) -> ToolSpec:
    """The OpenAI ``tools`` entry for ``tool``."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": schema_of(tool),
        },
    }


def tool_specs(tools: Iterable[Tool]) -> list[ToolSpec]:
    return [tool_spec(t) for t in tools]


def compact_schema(schema: Schema) -> str:
    """``{"a": number, "b": string (optional)}``: a schema as short as a prompt line wants."""
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        return "{}"
    required = set(schema.get("required") or ())
    fields = []
    for name, spec in properties.items():
        kind = _kind(spec if isinstance(spec, dict) else {})
        fields.append(f'"{name}": {kind}' + ("" if name in required else " (optional)"))
    return "{" + ", ".join(fields) + "}"


def _kind(spec: Schema) -> str:
    if isinstance(spec.get("enum"), list):
        return "one of " + "|".join(json.dumps(v, ensure_ascii=False) for v in spec["enum"])
    kind = spec.get("type", "any")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if kind == "array" and isinstance(spec.get("items"), dict):
        return f"array of {_kind(spec['items'])}"
    return str(kind)


def check_schema(tool: Tool) -> None:
    """Raise ``ValueError`` when a tool declares a schema that is not a valid object schema
    (at registration, so a bad tool fails at start, not in the middle of a run)."""
    declared = parameters_of(tool)
    if declared is None:
        return
    try:
        text = json.dumps(declared, sort_keys=True)
    except (TypeError, ValueError):  # not JSON (a set, a cycle): checked as it is
        problem = _schema_problem(declared)
    else:
        problem = _checked_text(text)
    if problem is not None:
        raise ValueError(f"tool {tool.name!r}: {problem}")


@functools.lru_cache(maxsize=256)
def _checked_text(text: str) -> str | None:
    """``_schema_problem`` of a schema as canonical JSON, remembered: every run registers
    its memory tools again, and checking their schemas was 2% of the bot's CPU (issue 46)."""
    return _schema_problem(json.loads(text))


def _schema_problem(declared: Schema) -> str | None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(declared)
    except SchemaError as exc:
        return f"invalid parameters schema: {exc.message}"
    if declared.get("type") != "object":
        return "parameters must describe an object"
    return None


def tool_input(tool: Tool, raw: str, *, native: bool = False) -> str:
    """What ``tool.run`` receives for ``raw``, the model's input (``native``: the JSON
    arguments of a native tool call). Raises ``ToolError`` saying what is wrong."""
    declared = parameters_of(tool)
    if declared is None and not native:
        return raw
    arguments = _arguments(tool, raw, declared, native=native)
    schema = declared if declared is not None else schema_of(tool)
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(schema).iter_errors(arguments), key=_error_order)
    if errors:
        raise ToolError(f"{tool.name}: {_describe(errors[0])}")
    if declared is None:
        value: str = arguments[input_name(tool)]
        return value
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)


def _arguments(tool: Tool, raw: str, declared: Schema | None, *, native: bool) -> Any:
    text = raw.strip()
    if len(text) > MAX_ARGUMENTS:
        raise ToolError(f"{tool.name}: the arguments are {len(text):,} characters long")
    if not text:
        text = "{}"
    try:
        value = json.loads(text)
    except ValueError as exc:
        if native:  # e.g. cut off when the reply hit max_tokens
            raise ToolError(f"{tool.name}: the arguments are not valid JSON ({exc})") from exc
        assert declared is not None  # a one-string tool's text input is passed, not parsed
        raise ToolError(
            f"{tool.name}: the input must be a JSON object like {compact_schema(declared)} ({exc})"
        ) from exc
    if isinstance(value, str):  # arguments double-encoded as a JSON string
        try:
            inner = json.loads(value)
        except ValueError:
            inner = None
        if isinstance(inner, dict):
            value = inner
        elif declared is None:
            value = {input_name(tool): value}
    return value


def _error_order(error: ValidationError) -> tuple[int, str]:
    return (len(error.path), str(error.message))


def _describe(error: ValidationError) -> str:
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    field = f"field '{where.lstrip('.')}'" if where else "the arguments"
    message = error.message
    if len(message) > 300:
        message = message[:299] + "…"
    return f"{field}: {message}"
