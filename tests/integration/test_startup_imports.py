"""Start-up: each command imports only what it needs (issue 25; bench/startup.py times it).

The command runs in a fresh interpreter, exactly as ``reactbot`` runs it (``bot.__main__``),
with no model, Redis or platform configured; the runner then writes which of the heavy
modules were loaded. No timing is asserted: what is loaded is what decides the time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

RUNNER = """
import json, sys
watched, out, *argv = sys.argv[1:]
sys.argv = ["reactbot", *argv]
from bot.__main__ import main
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code
with open(out, "w") as f:
    json.dump({"code": code, "loaded": sorted(m for m in watched.split(",") if m in sys.modules)}, f)
"""

_SETTINGS = ("REACTBOT_", "OPENAI_", "REDIS_", "TAVILY_", "OTEL_", "DISCORD_", "SLACK_")

NEVER_FOR_HELP = (
    "openai",
    "jsonschema",
    "discord",
    "slack_bolt",
    "slack_sdk",
    "aiohttp",
    "pydantic",
    "yaml",
    "redis",
    "rich",
    "bot.app",
    "bot.config",
    "core.agent",
)
NEVER_FOR_ASK = (
    "openai",
    "jsonschema",
    "discord",
    "slack_bolt",
    "slack_sdk",
    "aiohttp",
    "yaml",
    "redis",
    "markdown_it",
    "rich.markdown",
    "bot.trace_commands",
)


def loaded_by(tmp_path: Path, *argv: str, watched: tuple[str, ...]) -> list[str]:
    """Which of ``watched`` the command loaded; it must succeed (an answered ``ask``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SETTINGS)}
    out = tmp_path / "loaded.json"
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, ",".join(watched), str(out), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=env,
    )
    assert out.exists(), done.stderr
    result = json.loads(out.read_text())
    assert result["code"] == 0, done.stdout + done.stderr
    loaded: list[str] = result["loaded"]
    return loaded


def test_help_loads_no_config_model_agent_sdk_or_terminal_ui(tmp_path: Path) -> None:
    loaded = loaded_by(tmp_path, "--help", watched=NEVER_FOR_HELP)
    assert loaded == []


def test_the_watch_sees_what_a_command_does_load(tmp_path: Path) -> None:
    """The runner would pass with any empty list: ask does load the config models."""
    loaded = loaded_by(tmp_path, "ask", "What is 6*7?", watched=("pydantic", "bot.app"))
    assert loaded == ["bot.app", "pydantic"]


def test_ask_on_the_demo_model_loads_no_sdk_schema_validator_or_markdown(tmp_path: Path) -> None:
    loaded = loaded_by(tmp_path, "ask", "What is 17*23+4?", watched=NEVER_FOR_ASK)
    assert loaded == []


def test_subcommand_help_loads_no_config_model_either(tmp_path: Path) -> None:
    loaded = loaded_by(tmp_path, "ask", "--help", watched=NEVER_FOR_HELP)
    assert loaded == []
