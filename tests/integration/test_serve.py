"""``reactbot serve`` as a whole: SIGTERM shuts down gracefully, a platform that cannot start
is reported in one line and the exit code says so."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import socket
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from bot.cli import run_cli
from tests.fakes.slack_server import FakeSlack

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_for_http(url: str, *, within: float = 30.0) -> None:
    """Poll ``url`` until it answers 200: a server starting on a loaded machine (four test
    workers on two cores) may take several seconds, so the bound is generous."""
    deadline = time.monotonic() + within
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            try:
                async with session.get(url) as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.02)
    pytest.fail(f"{url} did not come up")


async def test_sigterm_stops_serving_gracefully(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    async with FakeSlack() as fake:
        config = tmp_path / "c.yaml"
        config.write_text(
            f"slack:\n  mode: http\n  port: {port}\n  api_base_url: {fake.base_url.rstrip('/')}\n"
            "ops:\n  enabled: false\n"
        )
        env = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": "s3cret-signing"}
        serving = asyncio.create_task(run_cli(["--config", str(config), "serve"], env=env))
        await wait_for_http(f"http://127.0.0.1:{port}/healthz")
        os.kill(os.getpid(), signal.SIGTERM)  # what `docker stop` sends
        async with asyncio.timeout(15):
            code = await serving
    assert code == 0
    err = capsys.readouterr().err
    assert "Stopped (SIGTERM)." in err
    assert "note: Schedules live in this process only: without Redis" in err


async def test_a_platform_that_cannot_start_is_reported_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/api/v10"  # nothing listens there
    config = tmp_path / "c.yaml"
    config.write_text(f"discord:\n  api_base_url: {dead}\nops:\n  enabled: false\n")
    token = "discord-token-never-printed"
    out = io.StringIO()
    async with asyncio.timeout(30):
        code = await run_cli(
            ["--config", str(config), "serve"], env={"DISCORD_TOKEN": token}, stdout=out
        )
    err = capsys.readouterr().err
    assert code == 1
    assert "discord: stopped: " in err and "Traceback" not in err
    assert token not in err + out.getvalue()


def children_running(marker: str) -> list[int]:
    """This process's live children whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and marker in cmdline:
            found.append(int(entry.name))
    return found


async def test_serve_starts_the_mcp_servers_and_leaves_no_child_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    import sys

    port = free_port()
    async with FakeSlack() as fake:
        config = tmp_path / "c.yaml"
        config.write_text(
            f"slack:\n  mode: http\n  port: {port}\n  api_base_url: {fake.base_url.rstrip('/')}\n"
            "ops:\n  enabled: false\n"
            "tools:\n  mcp:\n    servers:\n"
            f"      - name: demo\n        command: {json.dumps(sys.executable)}\n"
            f"        args: [-m, tests.fakes.mcp_server]\n        cwd: {json.dumps(str(REPO))}\n"
            "      - name: broken\n        command: /nonexistent/mcp-server\n"
        )
        env = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": "s3cret-signing"}
        serving = asyncio.create_task(run_cli(["--config", str(config), "serve"], env=env))
        await wait_for_http(f"http://127.0.0.1:{port}/healthz")
        assert len(children_running("tests.fakes.mcp_server")) == 1
        os.kill(os.getpid(), signal.SIGTERM)
        async with asyncio.timeout(15):
            code = await serving
    assert code == 0
    assert children_running("tests.fakes.mcp_server") == []
    err = capsys.readouterr().err
    assert err.count("note: MCP server 'broken' did not start (command not found") == 1


CLEAN_ENV = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}


async def start_serve(env: dict[str, str], *args: str) -> asyncio.subprocess.Process:
    """``reactbot serve`` from this checkout, as compose runs it, with nothing else set."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        "serve",
        env={**CLEAN_ENV, **env},
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def says_one_line_then_waits_for_sigterm(serving: asyncio.subprocess.Process) -> str:
    """The line it says; it must be still up once it has said it, and exit 0 on SIGTERM."""
    assert serving.stderr is not None and serving.stdout is not None
    try:
        async with asyncio.timeout(60):
            line = (await serving.stderr.readline()).decode()
        # the line is said just before it starts waiting: had it exited instead, the
        # stream would have ended (no line) or the exit code would be known by now
        assert line.endswith("\n"), "serve exited without saying why"
        assert serving.returncode is None
        serving.send_signal(signal.SIGTERM)
        async with asyncio.timeout(15):
            rest = (await serving.stderr.read()).decode()
            out = (await serving.stdout.read()).decode()
            code = await serving.wait()
    finally:
        if serving.returncode is None:
            serving.kill()
            await serving.wait()
    assert code == 0
    assert rest == "" and out == "", "one line, and nothing after it"
    return line


async def test_with_no_tokens_and_wait_for_config_serve_waits_for_sigterm() -> None:
    serving = await start_serve({"REACTBOT_WAIT_FOR_CONFIG": "1"})
    line = await says_one_line_then_waits_for_sigterm(serving)
    assert line.startswith("No platform is configured: set DISCORD_TOKEN, SLACK_BOT_TOKEN")
    assert "REACTBOT_WEB__CHAT=true" in line and "TELEGRAM_BOT_TOKEN" in line
    assert "Waiting instead of exiting (REACTBOT_WAIT_FOR_CONFIG=1)" in line
    assert "SIGTERM ends the wait" in line


async def test_a_half_configured_platform_waits_naming_what_it_lacks() -> None:
    env = {"REACTBOT_WAIT_FOR_CONFIG": "1", "SLACK_BOT_TOKEN": "xoxb-never-printed"}
    line = await says_one_line_then_waits_for_sigterm(await start_serve(env))
    assert line.startswith("Slack is not configured yet: set SLACK_APP_TOKEN")
    assert "xoxb-never-printed" not in line


async def test_a_config_error_waits_too_after_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("agent:\n  max_stpes: 3\n")
    serving = await start_serve({"REACTBOT_WAIT_FOR_CONFIG": "1"}, "--config", str(config))
    assert serving.stderr is not None
    async with asyncio.timeout(60):
        error = (await serving.stderr.readline()).decode()
    assert error.startswith("config error: agent.max_stpes: unknown key")
    line = await says_one_line_then_waits_for_sigterm(serving)
    assert line.startswith("Waiting instead of exiting (REACTBOT_WAIT_FOR_CONFIG=1): fix the")


async def test_without_wait_for_config_serve_still_exits_2() -> None:
    serving = await start_serve({})
    async with asyncio.timeout(60):
        _, err = await serving.communicate()
    assert serving.returncode == 2
    assert b"No platform is configured, so there is nothing to serve." in err
