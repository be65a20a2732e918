"""The pure parts of core.tools.mcp: results as Observations, names, examples, hints, and how
MCP tools read in a text-mode prompt. The SDK's own result types are built directly here;
talking to servers is in tests/integration/test_mcp.py."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import mcp_types as types
import pytest

from core import prompt
from core.errors import ToolError
from core.tools import ToolRegistry, needs_approval
from core.tools.mcp import (
    MCPTool,
    MCPTools,
    ServerSpec,
    StdioServer,
    example_call,
    hints_of,
    render_result,
    safe_name,
)
from core.tools.schema import tool_spec


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def result(*content: Any, structured: Any = None, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=list(content), structured_content=structured, is_error=error
    )


# --------------------------------------------------------------------------------------------
# Results


def test_text_blocks_are_joined() -> None:
    assert render_result(result(text("one"), text("two"))).text == "one\ntwo"


def test_structured_content_alone_is_compact_json() -> None:
    shown = render_result(result(structured={"rows": [1, 2], "name": "ü"})).text
    assert shown == '{"rows":[1,2],"name":"ü"}'


def test_text_that_is_the_structured_contents_json_is_shown_once_compactly() -> None:
    data = {"a": 1, "b": [1, 2]}
    shown = render_result(result(text(json.dumps(data, indent=2)), structured=data)).text
    assert shown == '{"a":1,"b":[1,2]}'


def test_the_sdks_result_wrapping_of_plain_text_is_not_repeated() -> None:
    assert render_result(result(text("42"), structured={"result": "42"})).text == "42"
    assert render_result(result(text("42"), structured={"result": 42})).text == "42"


def test_text_and_different_structured_content_are_both_shown() -> None:
    shown = render_result(result(text("3 rows"), structured={"rows": 3})).text
    assert shown == '3 rows\n{"rows":3}'


def test_images_and_audio_are_placeholders_with_type_and_size() -> None:
    png = base64.b64encode(b"x" * 2048).decode()
    wav = base64.b64encode(b"y" * 10).decode()
    rendered = render_result(
        result(
            text("Here:"),
            types.ImageContent(type="image", data=png, mime_type="image/png"),
            types.AudioContent(type="audio", data=wav, mime_type="audio/wav"),
        )
    )
    assert rendered.text == "Here:\n[image: image/png, 2.0 KB]\n[audio: audio/wav, 10 bytes]"
    assert [(a.mime_type, a.data) for a in rendered.attachments] == [
        ("image/png", png),
        ("audio/wav", wav),
    ]


def test_megabytes_are_named_as_such() -> None:
    data = base64.b64encode(b"z" * (3 * 1024 * 1024)).decode()
    image = types.ImageContent(type="image", data=data, mime_type="image/jpeg")
    assert render_result(result(image)).text == "[image: image/jpeg, 3.0 MB]"


def test_resource_links_are_links_and_web_ones_are_sources() -> None:
    rendered = render_result(
        result(
            types.ResourceLink(type="resource_link", name="a.txt", uri="file:///srv/a.txt"),
            types.ResourceLink(
                type="resource_link", name="doc", title="The doc", uri="https://x.org/doc"
            ),
        )
    )
    assert rendered.text == "a.txt <file:///srv/a.txt>\nThe doc <https://x.org/doc>"
    assert rendered.sources == ("https://x.org/doc",)


def test_embedded_resources_show_their_text_or_a_placeholder() -> None:
    blob = base64.b64encode(b"\x00" * 100).decode()
    rendered = render_result(
        result(
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///n.md", text="# Notes"),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="file:///b.bin", blob=blob, mime_type="application/zip"
                ),
            ),
        )
    )
    assert rendered.text == (
        "file:///n.md:\n# Notes\n[resource: application/zip, 100 bytes] file:///b.bin"
    )
    assert rendered.attachments[0].name == "file:///b.bin"


def test_an_error_result_raises_tool_error_with_its_text() -> None:
    with pytest.raises(ToolError, match=r"^no such file: a\.txt$"):
        render_result(result(text("no such file: a.txt"), error=True))


def test_an_empty_result_says_so() -> None:
    assert render_result(result()).text == "(the tool returned nothing)"


# --------------------------------------------------------------------------------------------
# Names, examples, hints


@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        ("github_search_issues", "github_search_issues"),
        ("files_read.file", "files_read_file"),
        ("db_query/rows", "db_query_rows"),
        ("x_" + "é" * 3, "x____"),
        ("s_" + "a" * 100, "s_" + "a" * 62),
    ],
)
def test_names_are_made_safe_for_function_calling(raw: str, safe: str) -> None:
    assert safe_name(raw) == safe


def tool(name: str, schema: dict[str, Any] | None = None, **kwargs: Any) -> types.Tool:
    return types.Tool(name=name, input_schema=schema or {"type": "object"}, **kwargs)


def publish(mcp: MCPTools, server: str, *tools: types.Tool) -> int:
    async def call(*_: Any) -> Any:
        raise AssertionError("not called")

    link = type("Link", (), {"call": staticmethod(call)})()
    return mcp._publish(ServerSpec(server, StdioServer("x")), list(tools), link)  # type: ignore[arg-type]


def test_colliding_names_get_a_number_and_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    registry = ToolRegistry()
    mcp = MCPTools(registry, [])
    caplog.set_level(logging.WARNING)
    publish(mcp, "a", tool("b.c"), tool("b_c"))
    publish(mcp, "a_b", tool("c"))
    assert registry.names == ["a_b_c", "a_b_c_2", "a_b_c_3"]
    assert [r.getMessage() for r in caplog.records] == [
        "MCP tool name 'a_b_c' is taken: server 'a''s tool 'b_c' is called 'a_b_c_2'",
        "MCP tool name 'a_b_c' is taken: server 'a_b''s tool 'c' is called 'a_b_c_3'",
    ]
    assert [t.remote for t in registry] == ["b.c", "b_c", "c"]  # type: ignore[attr-defined]


def test_names_stay_the_same_when_a_server_lists_again() -> None:
    registry = ToolRegistry()
    mcp = MCPTools(registry, [])
    publish(mcp, "a", tool("b_c"))
    publish(mcp, "a_b", tool("c"))  # a_b_c is taken: a_b_c_2
    publish(mcp, "a_b", tool("c"), tool("d"))  # listed again: the same name, not a third
    publish(mcp, "a", tool("x"))  # b_c gone
    assert sorted(registry.names) == ["a_b_c_2", "a_b_d", "a_x"]


def test_a_name_already_taken_or_a_bad_schema_is_handled() -> None:
    registry = ToolRegistry()
    mcp = MCPTools(registry, [])
    registry.add(
        MCPTool(
            "x_y", "", "x_y[{}]", {"type": "object"}, hints_of(tool("y")), "", "y", None, call=None
        )
    )  # type: ignore[arg-type]
    count = publish(
        mcp, "x", tool("y"), tool("bad", {"type": "object", "properties": 3}), tool("ok")
    )
    assert count == 2 and sorted(registry.names) == ["x_ok", "x_y", "x_y_2"]


def test_an_allow_list_keeps_only_the_named_tools() -> None:
    registry = ToolRegistry()
    mcp = MCPTools(registry, [])

    async def call(*_: Any) -> Any:
        raise AssertionError

    link = type("Link", (), {"call": staticmethod(call)})()
    spec = ServerSpec("s", StdioServer("x"), allow=frozenset({"keep"}), approval=False)
    mcp._publish(spec, [tool("keep"), tool("drop")], link)  # type: ignore[arg-type]
    (kept,) = list(registry)
    assert kept.name == "s_keep" and not needs_approval(kept)  # approval: false, over hints


def test_an_example_fills_the_required_arguments() -> None:
    schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "default": 10},
            "state": {"enum": ["open", "closed"]},
            "labels": {"type": ["array", "null"]},
            "exact": {"type": "boolean"},
            "score": {"type": "number", "examples": [0.5]},
        },
        "required": ["query", "limit", "state", "labels", "exact", "score", "ghost"],
    }
    assert example_call("gh_search", schema) == (
        'gh_search[{"query": "text", "limit": 10, "state": "open", "labels": [], '
        '"exact": true, "score": 0.5}]'
    )
    assert example_call("t", {"type": "object"}) == "t[{}]"


def test_hints_follow_the_annotations_with_mcps_defaults() -> None:
    bare = hints_of(tool("t", title="Title"))
    assert (bare.read_only, bare.destructive, bare.open_world, bare.title) == (
        False,
        True,
        True,
        "Title",
    )
    notes = types.ToolAnnotations(read_only_hint=True, open_world_hint=False, title="Read")
    read = hints_of(tool("t", annotations=notes))
    assert (read.read_only, read.destructive, read.open_world, read.title) == (
        True,
        True,
        False,
        "Read",
    )
    additive = hints_of(tool("t", annotations=types.ToolAnnotations(destructive_hint=False)))
    assert not additive.read_only and not additive.destructive


# --------------------------------------------------------------------------------------------
# In the prompt


def test_a_long_description_is_one_line_in_text_mode_and_whole_natively() -> None:
    registry = ToolRegistry()
    mcp = MCPTools(registry, [])
    description = "Searches issues.\n\nArguments:\n- query: GitHub search syntax\n" + "x" * 2000
    schema = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"],
    }
    publish(mcp, "gh", tool("search", schema, description=description))
    lines = prompt.tool_lines(registry).splitlines()
    assert lines[0] == (
        '- gh_search: Searches issues. Input: a JSON object {"query": string, '
        '"limit": integer (optional)}. Example: gh_search[{"query": "text"}]'
    )
    spec = tool_spec(registry.get("gh_search"))  # type: ignore[arg-type]
    assert spec["function"]["parameters"] == schema
    assert spec["function"]["description"].startswith("Searches issues.\n\nArguments:")
    assert len(spec["function"]["description"]) == 1024  # bounded: it is in every prompt


def test_one_line_cuts_a_long_first_paragraph() -> None:
    assert prompt.one_line("  a\n b  \n\nsecond") == "a b"
    assert prompt.one_line("w " * 400).endswith("…")
    assert len(prompt.one_line("w " * 400)) == prompt.DESCRIPTION_CHARS
