"""MCP end to end through the command line: ``reactbot tools`` and ``reactbot ask`` with the
fake OpenAI server calling a tool of the real MCP test server (run over stdio by the bot),
in text and in tools mode."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.cli import run_cli
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall

REPO = Path(__file__).resolve().parents[2]

DEMO = f"""\
      - name: demo
        command: {json.dumps(sys.executable)}
        args: ["-m", "tests.fakes.mcp_server"]
        cwd: {json.dumps(str(REPO))}
        env_from: [DEMO_TOKEN]
"""
BROKEN = """\
      - name: broken
        command: /nonexistent/mcp-server
      - name: old
        enabled: false
        url: http://127.0.0.1:9/mcp
"""


def config(tmp_path: Path, servers: str, extra: str = "") -> str:
    path = tmp_path / "config.yaml"
    path.write_text(f"{extra}tools:\n  mcp:\n    servers:\n{servers}", encoding="utf-8")
    return str(path)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def env_for(fake: FakeOpenAI | None = None) -> dict[str, str]:
    env = {"DEMO_TOKEN": "demo-token-0001"}
    if fake is not None:
        env |= {
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": fake.base_url,
            "REACTBOT_MODEL": "fake-model",
        }
    return env


async def reactbot(path: str, *args: str, env: dict[str, str]) -> tuple[int, str]:
    out = io.StringIO()
    code = await run_cli(["--config", path, *args], env=env, stdout=out)
    return code, out.getvalue()


async def test_reactbot_tools_lists_built_in_and_server_tools_and_the_servers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    approval = "agent:\n  approval:\n    tools: [DEMO_measure]\n"
    code, out = await reactbot(config(tmp_path, DEMO + BROKEN, approval), "tools", env=env_for())
    assert code == 1, out  # a server did not start
    lines = [" ".join(line.split()) for line in out.splitlines()]
    assert lines[0] == "TOOL SOURCE APPROVAL HINTS INPUT"
    assert 'calculate built-in no read-only {"expression": string}' in lines
    assert (
        'demo_add mcp:demo no read-only {"a": integer, "b": integer, "note": string (optional)}'
        in lines
    )
    assert 'demo_delete_note mcp:demo yes destructive, open-world {"path": string}' in lines
    assert "demo_fail mcp:demo yes destructive, open-world" in " | ".join(lines)
    assert 'demo_measure mcp:demo yes read-only {"x": integer}' in lines  # listed by the operator
    assert lines[lines.index("MCP SERVER TRANSPORT STATE") + 1 :] == [
        "demo stdio up: 12 tools",
        "broken stdio did not start: command not found: /nonexistent/mcp-server",
        "old http disabled (enabled: false)",
    ]
    err = capsys.readouterr().err
    assert err.count("MCP server 'broken' did not start") == 1  # reported once


async def test_reactbot_tools_exits_0_when_every_server_is_up(tmp_path: Path) -> None:
    code, out = await reactbot(config(tmp_path, DEMO), "tools", env=env_for())
    assert code == 0, out
    assert "demo stdio up: 12 tools" in " ".join(out.split())


async def test_a_variable_that_is_not_set_keeps_the_server_out_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = await reactbot(config(tmp_path, DEMO), "tools", env={})
    assert code == 1
    assert "demo stdio did not start: DEMO_TOKEN is not set in the environment" in " ".join(
        out.split()
    )
    assert "demo_add" not in out


async def test_ask_in_text_mode_calls_an_mcp_tool(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.reply('Thought: I will add them.\nAction: demo_add[{"a": 2, "b": 3}]')
    fake.reply("Thought: Done.\nAction: finish[2 + 3 = 5.]")
    code, out = await reactbot(
        config(tmp_path, DEMO + BROKEN), "ask", "What is 2 + 3?", env=env_for(fake)
    )
    assert code == 0, out
    assert 'Action: demo_add[{"a": 2, "b": 3}]' in out
    assert "Observation: 5" in out and "Answer: 2 + 3 = 5." in out
    fake.assert_complete()
    system = fake.requests[0]["messages"][0]["content"]
    assert (
        '- demo_add: Adds two whole numbers. Input: a JSON object {"a": integer, "b": integer, '
        '"note": string (optional)}. Example: demo_add[{"a": 1, "b": 1}]'
    ) in system
    assert "second paragraph" not in system  # compact in text mode
    assert "broken_" not in system
    assert capsys.readouterr().err.count("MCP server 'broken' did not start") == 1


async def test_ask_in_tools_mode_calls_an_mcp_tool_natively(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    fake.reply(
        "I will add them.",
        tool_calls=[FakeToolCall("demo_add", '{"a": 2, "b": 3}', argument_chunk_size=4)],
    )
    fake.reply("2 + 3 = 5.")
    path = config(tmp_path, DEMO)
    code, out = await reactbot(path, "ask", "--mode", "tools", "What is 2 + 3?", env=env_for(fake))
    assert code == 0, out
    assert 'Action: demo_add[{"a": 2, "b": 3}]' in out
    assert "Observation: 5" in out and "Answer: 2 + 3 = 5." in out
    fake.assert_complete()
    first, second = fake.requests
    (spec,) = [t for t in first["tools"] if t["function"]["name"] == "demo_add"]
    parameters = spec["function"]["parameters"]
    assert parameters["required"] == ["a", "b"]
    assert parameters["properties"]["note"] == {"default": "", "title": "Note", "type": "string"}
    assert spec["function"]["description"].startswith("Adds two whole numbers.\n\n")
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": "<observation>\n5\n</observation>",
    }


@pytest.mark.parametrize("answer", ["no", "yes"])
async def test_a_destructive_mcp_tool_waits_for_a_person(
    tmp_path: Path, fake: FakeOpenAI, answer: str
) -> None:
    """Its annotations say it is not read-only, so it runs only once someone approves it:
    here ``ask --approve``, which answers for the person in a script."""
    fake.reply('Thought: I will delete it.\nAction: demo_delete_note[{"path": "a.md"}]')
    fake.reply("Thought: Reported.\nAction: finish[Done.]")
    path = config(tmp_path, DEMO)
    code, out = await reactbot(path, "ask", "--approve", answer, "Delete a.md", env=env_for(fake))
    assert code == 0, out
    observation = fake.requests[1]["messages"][-1]["content"]
    if answer == "yes":
        assert "deleted a.md" in observation
    else:
        assert "deleted a.md" not in observation and "denied" in observation.lower()
    fake.assert_complete()


def test_without_servers_the_mcp_sdk_is_never_imported() -> None:
    import subprocess

    code = (
        "import asyncio, sys\n"
        "from bot.app import App\n"
        "from bot.config import load_config\n"
        "async def main():\n"
        "    app = App.create(load_config(None, {}))\n"
        "    await app.start()\n"
        "    await app.aclose()\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'mcp', 'mcp_types'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
