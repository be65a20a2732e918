"""``reactbot serve --platform web`` as a person starts it: the page answers on web.port, a
question to the offline demo model streams to its answer, SIGTERM ends it cleanly; on an
address other than loopback it will not start without ``REACTBOT_WEB_TOKEN``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import aiohttp
import pytest

from bot.cli import run_cli
from tests.integration.test_serve import free_port, wait_for_http
from tests.integration.test_web_chat import _csrf


async def test_serve_web_answers_a_question_and_stops_on_sigterm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    config = tmp_path / "c.yaml"
    config.write_text(f"web:\n  port: {port}\nops:\n  enabled: false\n")
    serving = asyncio.create_task(run_cli(["--config", str(config), "serve", "--platform", "web"]))
    url = f"http://127.0.0.1:{port}"
    await wait_for_http(url + "/")
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        async with http.get(url + "/") as page:
            csrf = _csrf(await page.text())
        async with http.get(url + "/api/events") as events:
            headers = {"X-CSRF-Token": csrf, "Origin": url}
            async with http.post(
                url + "/api/ask", json={"question": "What is 17*23+4?"}, headers=headers
            ) as asked:
                assert asked.status == 202
            async with asyncio.timeout(20):
                while True:
                    line = (await events.content.readline()).decode()
                    if line.startswith("data: ") and json.loads(line[6:]).get("final"):
                        final = json.loads(line[6:])
                        break
    assert final["answer"]["text"] == "17*23+4 = 395"
    assert final["trace_url"].startswith("/t/")
    os.kill(os.getpid(), signal.SIGTERM)
    async with asyncio.timeout(15):
        code = await serving
    assert code == 0
    err = capsys.readouterr().err
    assert f"web chat: open http://127.0.0.1:{port}/" in err and "Stopped (SIGTERM)." in err


async def test_a_public_address_without_a_token_does_not_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"web:\n  host: 0.0.0.0\n  port: {free_port()}\nops:\n  enabled: false\n")
    async with asyncio.timeout(20):
        code = await run_cli(["--config", str(config), "serve", "--platform", "web"], env={})
    assert code == 2
    err = capsys.readouterr().err
    assert "REACTBOT_WEB_TOKEN" in err and "not a loopback address" in err
