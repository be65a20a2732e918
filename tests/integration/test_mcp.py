"""MCP servers' tools through the real SDK, against a real server written with the SDK
(``tests/fakes/mcp_server.py``), run as a subprocess over stdio and over Streamable HTTP on
a local port. Nothing of the client is mocked.

One stdio and one HTTP connection are shared by the tests that only call tools (module
scope); the tests that kill, restart or fail servers open their own.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import pytest_asyncio

from core.agent import Agent
from core.events import Finished, ObservationReady
from core.scripted import ScriptedModel
from core.tools import ToolRegistry, needs_approval
from core.tools.mcp import HttpServer, MCPTool, MCPTools, ServerSpec, StdioServer
from core.tools.schema import tool_input
from tests.fakes.mcp_server import PNG

pytestmark = pytest.mark.asyncio(loop_scope="module")

REPO = Path(__file__).resolve().parents[2]
CALL_TIMEOUT = 1.0
"""Short, for the slow tool; connecting has its own (longer) limit."""
CONNECT = 20.0
TOKEN = "demo-token-value-1234"


def stdio(name: str = "demo", **kwargs: object) -> ServerSpec:
    env = {"DEMO_TOKEN": TOKEN}
    server = StdioServer(sys.executable, ("-m", "tests.fakes.mcp_server"), str(REPO), env)
    return ServerSpec(name, server, **kwargs)  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class HttpMCPServer:
    """The test server over Streamable HTTP in its own process; kill and start it at will."""

    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.mcp_server", "http", str(self.port)],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"the MCP test server did not listen on port {self.port}")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpMCPServer]:
    server = HttpMCPServer()
    server.start()
    yield server
    server.kill()


@dataclass
class Connected:
    mcp: MCPTools
    tools: ToolRegistry

    def tool(self, name: str) -> MCPTool:
        tool = self.tools.get(name)
        assert isinstance(tool, MCPTool), (name, self.tools.names)
        return tool

    async def call(self, name: str, arguments: object = None) -> str:
        """A call as the agent makes it: the arguments checked against the schema first."""
        tool = self.tool(name)
        result = await tool.run(tool_input(tool, json.dumps(arguments or {})))
        return result.text


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def both(http_server: HttpMCPServer) -> AsyncIterator[Connected]:
    """``demo`` over stdio and ``web`` over HTTP, in one registry."""
    registry = ToolRegistry()
    specs = [stdio("demo"), ServerSpec("web", HttpServer(http_server.url))]
    mcp = MCPTools(registry, specs, timeout=CALL_TIMEOUT, connect_timeout=CONNECT)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-parent-secret-must-not-pass")
        patch.setenv("REACTBOT_UNRELATED", "x")
        assert await mcp.start() == []
    yield Connected(mcp, registry)
    await mcp.aclose()


SERVERS = pytest.mark.parametrize("server", ["demo", "web"])


# --------------------------------------------------------------------------------------------
# Listing


@SERVERS
async def test_every_tool_is_listed_as_server_tool_with_its_schema_and_hints(
    both: Connected, server: str
) -> None:
    names = [n for n in both.tools.names if n.startswith(f"{server}_")]
    assert {f"{server}_{t}" for t in ("add", "delete_note", "fail", "image", "slow")} <= set(names)
    add = both.tool(f"{server}_add")
    assert add.remote == "add" and add.source == f"mcp:{server}"
    assert add.parameters["required"] == ["a", "b"]
    assert add.parameters["properties"]["note"]["type"] == "string"
    assert add.description.startswith("Adds two whole numbers.")
    assert add.example == f'{server}_add[{{"a": 1, "b": 1}}]'
    assert add.hints.read_only and not add.hints.open_world
    assert not needs_approval(add)  # read-only
    delete = both.tool(f"{server}_delete_note")
    assert delete.hints.destructive and needs_approval(delete)
    fail = both.tool(f"{server}_fail")  # no annotations: MCP's defaults
    assert not fail.hints.read_only and fail.hints.destructive and fail.hints.open_world
    assert needs_approval(fail)
    status = {s.name: s for s in both.mcp.status()}[server]
    assert status.state == "up" and status.tools == len(names)


# --------------------------------------------------------------------------------------------
# Results


@SERVERS
async def test_a_call_with_several_arguments(both: Connected, server: str) -> None:
    assert await both.call(f"{server}_add", {"a": 2, "b": 40, "note": "sum"}) == "42 (sum)"
    assert await both.call(f"{server}_add", {"b": 1, "a": 2}) == "3"


@SERVERS
async def test_an_error_result_raises_a_tool_error_with_the_servers_text(
    both: Connected, server: str
) -> None:
    from core.errors import ToolError

    with pytest.raises(ToolError, match="could not do it: disk full"):
        await both.call(f"{server}_fail", {"reason": "disk full"})


@SERVERS
async def test_a_protocol_error_or_a_wrong_input_is_a_tool_error(
    both: Connected, server: str
) -> None:
    from core.errors import ToolError

    with pytest.raises(ToolError) as info:
        await both.call(f"{server}_refuse")
    assert str(info.value) == (
        f"{server}_refuse: the server refused the call: refused: the moon is not full"
    )
    with pytest.raises(ToolError, match="the input must be a JSON object"):
        await both.tool(f"{server}_add").run("[1, 2]")


@SERVERS
async def test_an_image_is_a_placeholder_and_its_bytes_ride_along(
    both: Connected, server: str
) -> None:
    import base64

    tool = both.tool(f"{server}_image")
    result = await tool.run("{}")
    assert result.text == "[image: image/png, 1.0 KB]"
    (attachment,) = result.attachments
    assert attachment.mime_type == "image/png"
    assert base64.b64decode(attachment.data) == PNG


@SERVERS
async def test_structured_content_is_compact_json_and_links_are_links(
    both: Connected, server: str
) -> None:
    # The server sends the JSON indented as text and as structured content: shown once.
    assert await both.call(f"{server}_measure", {"x": 4}) == '{"x":4,"double":8,"name":"mesure"}'
    result = await both.tool(f"{server}_readme").run("{}")
    assert result.text == "See the README.\nREADME.md <https://example.com/demo/README.md>"
    assert result.sources == ("https://example.com/demo/README.md",)


@SERVERS
async def test_a_call_past_the_timeout_is_cancelled_on_the_server_and_reported(
    both: Connected, server: str
) -> None:
    from core.errors import ToolTimeout

    before = json.loads(await both.call(f"{server}_stats"))["cancelled"]
    started = time.monotonic()
    with pytest.raises(ToolTimeout) as info:
        await both.call(f"{server}_slow", {"seconds": 30})
    assert time.monotonic() - started < CALL_TIMEOUT + 2
    assert str(info.value) == (
        f"{server}_slow did not finish within 1 s; the call was cancelled on the server"
    )
    # The server's handler was cancelled (notifications/cancelled on stdio, the aborted
    # request on a 2026 HTTP connection), not left running.
    await until_async(
        lambda: both.call(f"{server}_stats"), lambda s: json.loads(s)["cancelled"] == before + 1
    )


@SERVERS
async def test_a_run_stopped_during_a_call_cancels_it_on_the_server(
    http_server: HttpMCPServer, server: str
) -> None:
    from core.events import ActionDecided, Cancelled

    # A call timeout far beyond the wait below: only the Stop can cancel the call in time.
    spec = stdio() if server == "demo" else ServerSpec("web", HttpServer(http_server.url))
    registry = ToolRegistry()
    connected = Connected(MCPTools(registry, [spec], timeout=60), registry)
    try:
        await connected.mcp.start()
        before = json.loads(await connected.call(f"{server}_stats"))["cancelled"]
        model = ScriptedModel([f'Thought: wait\nAction: {server}_slow[{{"seconds": 60}}]'])
        run = Agent(model, connected.tools).start("Wait, please.")
        async for event in run.events():
            if isinstance(event, ActionDecided):
                await asyncio.sleep(0.2)  # the call is on its way
                run.cancel(by="the Stop button")
        assert isinstance(await run.wait(), Cancelled)
        await until_async(
            lambda: connected.call(f"{server}_stats"),
            lambda s: json.loads(s)["cancelled"] == before + 1,
        )
    finally:
        await connected.mcp.aclose()


async def until_async(
    fetch: Callable[[], Awaitable[str]], ok: Callable[[str], bool], *, seconds: float = 5
) -> None:
    deadline = time.monotonic() + seconds
    while not ok(value := await fetch()):
        if time.monotonic() > deadline:
            raise AssertionError(f"still {value!r} after {seconds} s")
        await asyncio.sleep(0.05)


async def test_the_child_gets_only_the_variables_it_is_given(both: Connected) -> None:
    seen = json.loads(await both.call("demo_environment"))
    assert seen["DEMO_TOKEN"] == TOKEN
    assert "OPENAI_API_KEY" not in seen["names"] and "REACTBOT_UNRELATED" not in seen["names"]
    # The SDK adds a fixed few; Python itself may add LC_CTYPE.
    allowed = {"DEMO_TOKEN", "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LC_CTYPE"}
    assert set(seen["names"]) <= allowed


@SERVERS
async def test_tools_list_changed_lists_the_tools_again(both: Connected, server: str) -> None:
    assert both.tools.get(f"{server}_extra") is None
    assert await both.call(f"{server}_grow") == "grown"
    await until(lambda: both.tools.get(f"{server}_extra") is not None, "the new tool listed")
    assert await both.call(f"{server}_extra") == "extra!"
    assert await both.call(f"{server}_add", {"a": 1, "b": 1}) == "2"  # the old ones stay


# --------------------------------------------------------------------------------------------
# Faults, each on its own servers


async def until(condition: Callable[[], bool], what: str, *, seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds} s for {what}")
        await asyncio.sleep(0.05)


def state_of(mcp: MCPTools, name: str) -> str:
    return {s.name: s.state for s in mcp.status()}[name]


async def observations(agent: Agent, question: str) -> list[ObservationReady]:
    events = [e async for e in agent.run(question, conversation="c")]
    assert isinstance(events[-1], Finished), events[-1]
    return [e for e in events if isinstance(e, ObservationReady)]


async def test_a_stdio_server_killed_mid_conversation_is_restarted() -> None:
    registry = ToolRegistry()
    mcp = MCPTools(registry, [stdio()], timeout=5, connect_timeout=CONNECT, backoff=(0.2, 1))
    model = ScriptedModel(
        [
            "Thought: which process?\nAction: demo_pid[{}]",
            "Thought: I know.\nAction: finish[known]",
            'Thought: add\nAction: demo_add[{"a": 1, "b": 2}]',
            "Thought: it is down.\nAction: finish[down]",
            'Thought: again\nAction: demo_add[{"a": 1, "b": 2}]',
            "Thought: back.\nAction: finish[3]",
        ]
    )
    agent = Agent(model, registry)
    try:
        await mcp.start()
        (first,) = await observations(agent, "Which pid?")
        pid = int(first.text)
        os.kill(pid, signal.SIGKILL)
        await until(lambda: state_of(mcp, "demo") != "up", "the server marked down")
        (second,) = await observations(agent, "Add 1 and 2")
        assert second.error
        assert second.text.startswith("Error: the MCP server 'demo' is unavailable (")
        await until(lambda: state_of(mcp, "demo") == "up", "the server restarted")
        (third,) = await observations(agent, "Add 1 and 2 again")
        assert (third.text, third.error) == ("3", False)
        assert int((await registry.get("demo_pid").run("{}")).text) != pid  # type: ignore[union-attr]
        model.assert_complete()
    finally:
        await mcp.aclose()


async def test_an_http_server_killed_is_reconnected_when_it_is_back() -> None:
    from core.errors import ToolError

    server = HttpMCPServer()
    server.start()
    registry = ToolRegistry()
    spec = ServerSpec("web", HttpServer(server.url))
    mcp = MCPTools(registry, [spec], timeout=5, connect_timeout=CONNECT, backoff=(0.2, 1))
    add = None
    try:
        await mcp.start()
        add = registry.get("web_add")
        assert add is not None and (await add.run('{"a": 1, "b": 1}')).text == "2"
        server.kill()
        await until(lambda: state_of(mcp, "web") != "up", "the server marked down")
        with pytest.raises(ToolError, match=r"the MCP server 'web' is unavailable \("):
            await add.run('{"a": 1, "b": 1}')
        server.start()  # the same port
        await until(lambda: state_of(mcp, "web") == "up", "the server reconnected")
        assert (await registry.get("web_add").run('{"a": 2, "b": 2}')).text == "4"  # type: ignore[union-attr]
    finally:
        await mcp.aclose()
        server.kill()


async def test_servers_that_do_not_start_are_reported_once_and_the_others_work(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from aiohttp import web

    from tests.fakes.local_server import serve_locally

    async def refuse(request: web.Request) -> web.Response:  # a gateway refusing the token
        return web.json_response({"error": "invalid_token"}, status=401)

    gateway = web.Application()
    gateway.router.add_route("*", "/mcp", refuse)
    runner, port = await serve_locally(gateway)
    denied = HttpServer(f"http://127.0.0.1:{port}/mcp", {"Authorization": "Bearer tok-98765"})
    crash = StdioServer(
        sys.executable,
        ("-c", "import os, sys; sys.exit('bad token ' + os.environ['DEMO_TOKEN'])"),
        env={"DEMO_TOKEN": "tok-must-not-show-99"},
    )
    specs = [
        ServerSpec("missing", StdioServer("/nonexistent/mcp-server")),
        ServerSpec("crash", crash),
        ServerSpec("nokey", HttpServer("http://127.0.0.1:9/mcp"), problem="K is not set"),
        ServerSpec("refused", HttpServer(f"http://127.0.0.1:{free_port()}/mcp")),
        ServerSpec("nowhere", StdioServer(sys.executable, cwd="/nonexistent/dir")),
        ServerSpec("denied", denied),
        stdio("demo"),
    ]
    # Never answers, so it gets a short limit of its own (the others start meanwhile).
    silent = StdioServer(sys.executable, ("-c", "import sys; sys.stdin.read()"))
    hanging = MCPTools(ToolRegistry(), [ServerSpec("silent", silent)], connect_timeout=1)
    registry = ToolRegistry()
    mcp = MCPTools(registry, specs, timeout=5, connect_timeout=CONNECT)
    caplog.set_level(logging.WARNING)
    try:
        notes, silence = await asyncio.gather(mcp.start(), hanging.start())
        assert notes == [
            "MCP server 'missing' did not start (command not found: /nonexistent/mcp-server); "
            "its tools are left out.",
            "MCP server 'crash' did not start (the server exited; it said: bad token ***); "
            "its tools are left out.",
            "MCP server 'nokey' did not start (K is not set); its tools are left out.",
            f"MCP server 'refused' did not start (cannot connect to {specs[3].transport.url}); "  # type: ignore[union-attr]
            "its tools are left out.",
            "MCP server 'nowhere' did not start (cwd /nonexistent/dir is not a directory); "
            "its tools are left out.",
            f"MCP server 'denied' did not start ({denied.url} answered HTTP 401 (check the "
            "headers_from credentials)); its tools are left out.",
        ]
        assert silence == [
            "MCP server 'silent' did not start (no answer within 1 s); its tools are left out."
        ]
        assert [r for r in caplog.records if r.name == "core.tools.mcp"] == []  # said once
        states = {s.name: (s.state, s.tools) for s in mcp.status()}
        assert states["demo"][0] == "up" and states["crash"] == ("failed", 0)
        assert all(name.startswith("demo_") for name in registry.names)
        assert (await registry.get("demo_add").run('{"a": 1, "b": 2}')).text == "3"  # type: ignore[union-attr]
    finally:
        await asyncio.gather(mcp.aclose(), hanging.aclose())
        await runner.cleanup()


async def test_the_allow_list_the_approval_override_and_no_child_left_behind() -> None:
    registry = ToolRegistry()
    spec = stdio("demo", allow=frozenset({"add", "pid", "no_such_tool"}), approval=True)
    mcp = MCPTools(registry, [spec], timeout=5, connect_timeout=CONNECT)
    try:
        await mcp.start()
        assert registry.names == ["demo_add", "demo_pid"]
        add = registry.get("demo_add")
        assert add is not None and add.hints.read_only  # type: ignore[attr-defined]
        assert needs_approval(add)  # the server's approval: true wins over the hints
        pid = int((await registry.get("demo_pid").run("{}")).text)  # type: ignore[union-attr]
    finally:
        await mcp.aclose()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # stopped and reaped


async def test_closing_while_a_server_restarts_ends_quickly() -> None:
    registry = ToolRegistry()
    mcp = MCPTools(registry, [stdio()], timeout=5, connect_timeout=CONNECT, backoff=(30, 30))
    await mcp.start()
    pid = int((await registry.get("demo_pid").run("{}")).text)  # type: ignore[union-attr]
    os.kill(pid, signal.SIGKILL)
    await until(lambda: state_of(mcp, "demo") == "down", "the server marked down")
    started = time.monotonic()
    await mcp.aclose()  # in the middle of a 30 s backoff
    assert time.monotonic() - started < 10, "the 30 s backoff was not waited out"
