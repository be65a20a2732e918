"""What an MCP server's tools look like to the model, and what their results say.

``safe_name`` and ``hints_of`` name a tool and read its annotations; ``example_call`` shows
the model one plausible call; ``render_result`` turns a ``tools/call`` result into an
Observation's text (text joined, structured content as compact JSON, images, audio and blobs
as a placeholder with type and size whose bytes ride along as attachments, resource links as
links, ``isError`` as a ``ToolError``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

import mcp_types as types

from core.errors import ToolError
from core.tools import Attachment, ToolHints, ToolResult

MAX_NAME = 64
"""Function names in the OpenAI ``tools`` parameter: letters, digits, ``_`` and ``-``, 64 at most."""
MAX_DESCRIPTION = 1024
"""Characters of a server's tool description kept: it goes into every prompt."""


def safe_name(text: str) -> str:
    """``text`` as a function name: letters, digits, ``_`` and ``-``, at most 64 characters."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)[:MAX_NAME] or "tool"


def hints_of(tool: types.Tool) -> ToolHints:
    """The tool's annotations, with MCP's defaults for what it does not say."""
    notes = tool.annotations
    if notes is None:
        return ToolHints(title=tool.title)
    return ToolHints(
        read_only=notes.read_only_hint if notes.read_only_hint is not None else False,
        destructive=notes.destructive_hint if notes.destructive_hint is not None else True,
        open_world=notes.open_world_hint if notes.open_world_hint is not None else True,
        title=notes.title or tool.title,
    )


def example_call(name: str, schema: Mapping[str, Any]) -> str:
    """``name[{...}]`` with a plausible value for each required argument."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = [p for p in schema.get("required") or () if p in properties]
    values = {p: _sample(properties[p]) for p in required}
    return f"{name}[{json.dumps(values, ensure_ascii=False)}]"


_SAMPLES: Mapping[str, Any] = {
    "string": "text",
    "integer": 1,
    "number": 1,
    "boolean": True,
    "array": [],
    "object": {},
}


def _sample(spec: object) -> Any:
    if not isinstance(spec, dict):
        return "text"
    if "default" in spec:
        return spec["default"]
    for key in ("enum", "examples"):
        if isinstance(spec.get(key), list) and spec[key]:
            return spec[key][0]
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    return _SAMPLES.get(kind if isinstance(kind, str) else "string", "text")


def description(tool: types.Tool) -> str:
    text = tool.description or tool.title or ""
    text = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "", text).strip()
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"


def render_result(result: types.CallToolResult) -> ToolResult:
    """A tools/call result as the Observation's text; ``isError`` raises ``ToolError``."""
    parts: list[str] = []
    sources: list[str] = []
    attachments: list[Attachment] = []
    texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
    structured = result.structured_content
    says = _what_text_says(texts, structured)
    for block in result.content:
        if isinstance(block, types.TextContent):
            if says != "json":  # the text is the structured content's JSON: shown compactly below
                parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            parts.append(_placeholder(block.type, block.mime_type, block.data))
            attachments.append(Attachment(block.mime_type, block.data))
        elif isinstance(block, types.ResourceLink):
            parts.append(f"{block.title or block.name} <{block.uri}>")
            if block.uri.startswith(("http://", "https://")):
                sources.append(block.uri)
        else:
            parts.append(_embedded(block, attachments))
    if structured is not None and says != "wrapped":
        parts.append(json.dumps(structured, ensure_ascii=False, separators=(",", ":")))
    text = "\n".join(p for p in parts if p) or "(the tool returned nothing)"
    if result.is_error:
        raise ToolError(text)
    return ToolResult(text, tuple(dict.fromkeys(sources)), tuple(attachments))


def _what_text_says(texts: list[str], structured: Any) -> Literal["json", "wrapped", "other"]:
    """``json``: the text is the structured content serialised (as the spec asks servers to
    do); ``wrapped``: the structured content is the SDK's ``{"result": text}`` around it."""
    if structured is None or not texts:
        return "other"
    joined = "\n".join(texts)
    try:
        parsed = json.loads(joined)
    except ValueError:
        parsed = _NOTHING
    if parsed == structured:
        return "json"
    wrapped = isinstance(structured, dict) and list(structured) == ["result"]
    if wrapped and structured["result"] in (joined, parsed):
        return "wrapped"
    return "other"


_NOTHING = object()


def _embedded(block: types.EmbeddedResource, attachments: list[Attachment]) -> str:
    resource = block.resource
    if isinstance(resource, types.TextResourceContents):
        return f"{resource.uri}:\n{resource.text}"
    mime = resource.mime_type or "application/octet-stream"
    attachments.append(Attachment(mime, resource.blob, name=str(resource.uri)))
    return f"{_placeholder('resource', mime, resource.blob)} {resource.uri}"


def _placeholder(kind: str, mime_type: str, data: str) -> str:
    size = len(data.rstrip("=")) * 3 // 4  # the decoded size of base64, without decoding
    return f"[{kind}: {mime_type}, {_size(size)}]"


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"
