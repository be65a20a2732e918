"""Start-up: each command imports only what it needs (issue 25; bench/startup.py times it).

The command runs in a fresh interpreter, exactly as ``reactbot`` runs it (``bot.__main__``),
with no model, Redis or platform configured; the runner then writes which modules were
loaded and which programs were started through asyncio (the calculator's worker is one). No
timing is asserted: what is loaded and started is what decides the time.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

RUNNER = """
import json, sys
out, spy, *argv = sys.argv[1:]
sys.argv = ["reactbot", *argv]
spawned = []
if spy == "spy":  # it imports asyncio, which --help does not
    import asyncio
    create = asyncio.create_subprocess_exec
    async def watch(program, *args, **kwargs):
        spawned.append(program)
        return await create(program, *args, **kwargs)
    asyncio.create_subprocess_exec = watch
from bot.__main__ import main
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code
with open(out, "w") as f:
    json.dump({"code": code, "loaded": sorted(sys.modules), "spawned": spawned}, f)
"""

_SETTINGS = (
    "REACTBOT_",
    "OPENAI_",
    "REDIS_",
    "TAVILY_",
    "OTEL_",
    "DISCORD_",
    "SLACK_",
    "TELEGRAM_",
)

NEVER_FOR_ASK = (
    # SDKs and clients of what is not configured
    "openai",
    "httpx",
    "discord",
    "slack_bolt",
    "slack_sdk",
    "telegram",
    "aiohttp",
    "redis",
    "mcp",
    "opentelemetry",
    "prometheus_client",
    "jinja2",
    # readers and renderers a demo answer does not use
    "jsonschema",
    "yaml",
    "markdown_it",
    "pygments",
    "rich.markdown",
    "rich.syntax",
    "rich._emoji_codes",  # notes are printed as plain text
    "html.parser",
    "csv",
    "importlib.metadata",  # pydantic's plugin scan: with no file, nothing is validated
    # the bot's own code for other models, stores, tools, surfaces and commands
    "core.openai_model",
    "core.stores.redis",
    "core.tools.search",
    "core.tools.mcp",
    "core.html_text",
    "core.replay",
    "bot.serve",
    "bot.evals",
    "bot.trace_commands",
    "bot.tools_command",
    "bot.telemetry",
    "adapters.live",
    "adapters.pacing",
    "adapters.discord",
    "adapters.slack",
    "adapters.telegram",
    "adapters.web",
)
NEVER_FOR_HELP = (
    *NEVER_FOR_ASK,
    "asyncio",  # the command line is read before the event loop's module is imported
    "pydantic",
    "bot.app",
    "bot.config",
    "core.agent",
    "core.events",
    "rich",
    "adapters.terminal",
)
OPTIONAL = frozenset({"telegram", "mcp", "opentelemetry", "jsonschema", "pygments"})
"""Not installed by every extra: absent here, they cannot be loaded either."""


def run(tmp_path: Path, *argv: str, spy: bool = True) -> tuple[list[str], list[str]]:
    """The modules the command loaded and the programs it started (``spy``: watched, which
    imports asyncio first); it must succeed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SETTINGS)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    out = tmp_path / "loaded.json"
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(out), "spy" if spy else "-", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=env,
    )
    assert out.exists(), done.stderr
    result = json.loads(out.read_text())
    assert result["code"] == 0, done.stdout + done.stderr
    return result["loaded"], result["spawned"]


def loaded_by(tmp_path: Path, *argv: str, watched: tuple[str, ...]) -> list[str]:
    """Which of ``watched`` the command loaded, themselves or a module inside them."""
    loaded, _ = run(tmp_path, *argv, spy=False)
    return sorted(w for w in watched if any(m == w or m.startswith(w + ".") for m in loaded))


def test_help_loads_no_config_model_agent_sdk_or_terminal_ui(tmp_path: Path) -> None:
    loaded = loaded_by(tmp_path, "--help", watched=NEVER_FOR_HELP)
    assert loaded == []


def test_the_watch_sees_what_a_command_does_load(tmp_path: Path) -> None:
    """The runner would pass with any empty list: ask does load the config models."""
    watched = ("pydantic", "bot.app", "asyncio")
    loaded = loaded_by(tmp_path, "ask", "What is 6*7?", watched=watched)
    assert loaded == ["asyncio", "bot.app", "pydantic"]


def test_ask_on_the_demo_model_loads_no_sdk_schema_validator_or_markdown(tmp_path: Path) -> None:
    loaded = loaded_by(tmp_path, "ask", "What is 17*23+4?", watched=NEVER_FOR_ASK)
    assert loaded == []


def test_plain_arithmetic_starts_no_calculator_worker(tmp_path: Path) -> None:
    _, spawned = run(tmp_path, "ask", "What is 17*23+4?")
    assert spawned == []


def test_the_watch_sees_the_worker_start_for_a_power(tmp_path: Path) -> None:
    """The runner would pass with no spawn seen at all: a power is computed by the worker."""
    _, spawned = run(tmp_path, "ask", "What is 2^10?")
    assert spawned == [sys.executable]


def test_subcommand_help_loads_no_config_model_either(tmp_path: Path) -> None:
    loaded = loaded_by(tmp_path, "ask", "--help", watched=NEVER_FOR_HELP)
    assert loaded == []


@pytest.mark.parametrize("name", sorted(set(NEVER_FOR_HELP)))
def test_every_watched_name_is_a_module(name: str) -> None:
    """A misspelt name would never be loaded, and the tests above would pass whatever is."""
    top = name.split(".")[0]
    try:
        found = importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        found = False
    assert found or top in OPTIONAL, name
