"""The ``reactbot`` command end to end: the real console script, and in-process runs against
the local OpenAI-compatible fake over real HTTP."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import run_cli
from tests.fakes.openai_server import FakeOpenAI, FakeUsage

REPO = Path(__file__).resolve().parents[2]
REACTBOT = [sys.executable, "-m", "bot"]
"""The console script's entry point (``bot.__main__:main``), run from this checkout: the
installed ``reactbot`` script may belong to another checkout sharing the virtualenv."""
CLEAN_ENV = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}


def reactbot(
    *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*REACTBOT, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**CLEAN_ENV, **(env or {})},
        cwd=REPO,
    )


def test_ask_with_nothing_configured_uses_the_offline_demo_and_exits_0() -> None:
    result = reactbot("ask", "What is 17*23+4?")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Thought: I am the offline demo model" in out
    assert "Action: calculate[17*23+4]" in out
    assert "Observation: 395" in out
    assert "Answer: 17*23+4 = 395" in out
    assert "✓ 2 steps" in out and "offline demo model" in out
    assert "\x1b[" not in out  # piped output is plain text
    assert "offline demo model" in result.stderr  # said once at start


def test_ask_about_the_bot_uses_lookup_on_the_bundled_knowledge_base() -> None:
    result = reactbot("ask", "How do I connect you to Slack?")
    assert result.returncode == 0, result.stderr
    assert "Action: lookup[How do I connect you to Slack]" in result.stdout
    assert "slack.md" in result.stdout
    assert "Answer: Here is what the reactbot knowledge base says" in result.stdout


def test_ask_in_chinese_answers_in_chinese() -> None:
    result = reactbot("ask", "计算 2^10 等于多少？")
    assert result.returncode == 0, result.stderr
    assert "我是离线演示模型" in result.stdout
    assert "Action: calculate[2^10]" in result.stdout
    assert "Answer: 2^10 = 1024" in result.stdout


def test_bad_config_fails_at_start_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("agent:\n  max_stpes: 3\n")
    result = reactbot("--config", str(config), "ask", "hi")
    assert result.returncode == 2
    assert "agent.max_stpes" in result.stderr and "max_steps" in result.stderr


def test_serve_with_no_platform_says_how_to_enable_one() -> None:
    result = reactbot("serve")
    assert result.returncode == 2
    assert "DISCORD_TOKEN" in result.stderr and "SLACK_BOT_TOKEN" in result.stderr


def test_serve_with_a_signing_secret_but_no_app_token_names_http_mode_too() -> None:
    env = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": "s3cret-signing"}
    result = reactbot("serve", env=env)
    assert result.returncode == 2
    assert "set SLACK_APP_TOKEN" in result.stderr
    assert "Or set slack.mode: http" in result.stderr
    assert "SLACK_SIGNING_SECRET already set" in result.stderr
    assert "s3cret-signing" not in result.stderr


def test_no_command_with_nothing_configured_opens_the_chat() -> None:
    result = reactbot(stdin="What is 2*21?\n")  # what `make run` starts
    assert result.returncode == 0, result.stderr
    assert "reactbot chat" in result.stdout and "Answer: 2*21 = 42" in result.stdout
    hint = [line for line in result.stderr.splitlines() if "in a browser" in line]
    assert hint == [
        "To watch it think in a browser instead: reactbot serve --platform web, "
        "then open http://127.0.0.1:8080/"
    ]


def test_serve_names_the_web_chat_among_the_platforms() -> None:
    result = reactbot("serve")
    assert "reactbot serve --platform web, then open http://127.0.0.1:8080/" in result.stderr


def test_chat_repl_with_scripted_input(tmp_path: Path) -> None:
    export = tmp_path / "last.json"
    script = "\n".join(
        [
            "What is 2+2?",
            "/history",
            f"/export {export}",
            "/trace",
            "/reset",
            "/history",
            "/nope",
            "/quit",
        ]
    )
    result = reactbot("chat", stdin=script + "\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Answer: 2+2 = 4" in out
    assert "user: What is 2+2?" in out and "assistant: 2+2 = 4" in out
    history = out.split("Answer: 2+2 = 4", 1)[1].split("Trace written", 1)[0]
    assert "Question:" not in history  # the prompt's prefix is the model's business
    assert "History cleared" in out and "(no history)" in out
    assert "Trace " in out and "Action: calculate[2+2]" in out  # Markdown rendered by rich
    assert "**Action:**" not in out
    padded = [line for line in out.splitlines() if line != line.rstrip()]
    assert padded == [], "piped: no line padded to the console's width"
    assert "Unknown command /nope" in out
    data = json.loads(export.read_text())
    assert data["answer"] == "2+2 = 4" and data["steps"][0]["observation"] == "4"


SECRET = "sk-test-DO-NOT-PRINT-1234567890"


def env_for(fake: FakeOpenAI) -> dict[str, str]:
    return {
        "REACTBOT_MODEL": "fake-model",
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": SECRET,
    }


async def test_ask_against_an_openai_compatible_server(capsys: pytest.CaptureFixture[str]) -> None:
    async with FakeOpenAI(model="fake-model") as fake:
        fake.reply(
            "Thought: Simple arithmetic.\nAction: calculate[6*7]",
            usage=FakeUsage(300, 20),
        ).reply("Thought: Done.\nAction: finish[6*7 is 42.]", usage=FakeUsage(340, 10))
        out = io.StringIO()
        code = await run_cli(["ask", "What is 6*7?"], env=env_for(fake), stdout=out)
        fake.assert_complete()
    text = out.getvalue()
    assert code == 0, text
    assert "Action: calculate[6*7]" in text and "Observation: 42" in text
    assert "Answer: 6*7 is 42." in text
    assert "670 tokens" in text and "fake-model" in text
    assert fake.requests[0]["stop"] == ["\nObservation:"]
    assert fake.requests[0]["stream_options"] == {"include_usage": True}
    assert SECRET not in text + capsys.readouterr().err


async def test_ask_reports_a_model_failure_in_one_line_and_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with FakeOpenAI(model="fake-model") as fake:
        fake.error(401, f"Incorrect API key provided: {SECRET}")
        out = io.StringIO()
        code = await run_cli(["ask", "hi"], env=env_for(fake), stdout=out)
    text = out.getvalue()
    assert code == 1
    failure = [line for line in text.splitlines() if line.startswith("✗")]
    assert len(failure) == 1 and "key" in failure[0].lower()
    assert SECRET not in text + capsys.readouterr().err


LAYERING_PROBE = """
import sys, traceback
FORBIDDEN = {"discord", "slack_bolt", "slack_sdk", "redis", "rich", "adapters", "bot", "yaml", "mcp", "mcp_types"}
culprits = set()
class Watch:
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in FORBIDDEN:
            for frame in reversed(traceback.extract_stack()[:-1]):
                if "importlib" in frame.filename:
                    continue
                if "/core/" in frame.filename:  # imported by core itself, not by a library
                    culprits.add(f"{name} from {frame.filename.split('/core/')[-1]}:{frame.lineno}")
                break
        return None
sys.meta_path.insert(0, Watch())
import core, core.agent, core.parser, core.prompt, core.trace, core.events, core.history
import core.stores, core.stores.resilient, core.memory, core.demo, core.scripted, core.modes
import core.approval, core.tools, core.tools.schema, core.tools.calculator, core.tools.lookup
import core.tools.search, core.openai_model
print(";".join(sorted(culprits)))
"""


def test_import_core_loads_no_platform_redis_or_terminal_module() -> None:
    """Layering: core imports no platform SDK, Redis, terminal, config or MCP module (a
    library core uses may load one of them for itself, as httpx loads rich when click is
    installed: that is the library's business, so only core's own imports are checked)."""
    result = subprocess.run(
        [sys.executable, "-c", LAYERING_PROBE],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


async def test_step_model_runs_the_steps_and_the_main_model_answers(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("model:\n  step_model: small-model\n")
    async with FakeOpenAI(model="large-model") as fake:
        fake.reply("Thought: easy\nAction: finish[draft]").reply(
            "Thought: polish\nAction: finish[The final answer.]"
        )
        env = {**env_for(fake), "REACTBOT_MODEL": "large-model"}
        out = io.StringIO()
        code = await run_cli(["--config", str(config), "ask", "q"], env=env, stdout=out)
        fake.assert_complete()
    assert code == 0, out.getvalue()
    assert [r["model"] for r in fake.requests] == ["small-model", "large-model"]
    assert "The final answer." in out.getvalue()
