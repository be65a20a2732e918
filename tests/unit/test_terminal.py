"""Terminal rendering: styles on a TTY, plain when piped, folding, secret redaction in logs."""

from __future__ import annotations

import io
import logging

from rich.console import Console

from adapters.terminal.render import TerminalRenderer, fold
from bot.logs import RedactSecrets
from core.agent import Agent
from core.scripted import ScriptedModel
from core.tools import FunctionTool, ToolRegistry


def test_fold_keeps_first_lines_and_counts_the_rest() -> None:
    text = "\n".join(f"line {i}" for i in range(10))
    folded = fold(text, lines=3)
    assert folded.startswith("line 0\nline 1\nline 2 (+")
    shown = "line 0\nline 1\nline 2"
    assert folded == f"{shown} (+{len(text) - len(shown)} chars)"
    assert fold("short") == "short"


async def render(console: Console) -> TerminalRenderer:
    async def big(arg: str) -> str:
        return "row\n" * 50

    tools = ToolRegistry()
    tools.add(FunctionTool("big", big, "Big.", "big[x]"))
    model = ScriptedModel(
        ["Thought: look\nAction: big[x]", "Thought: done\nAction: finish[ok [1]]"]
    )
    renderer = TerminalRenderer(console)
    async for event in Agent(model, tools).run("q"):
        renderer.handle(event)
    return renderer


async def test_tty_output_is_styled_per_kind() -> None:
    out = io.StringIO()
    renderer = await render(Console(file=out, force_terminal=True, color_system="standard"))
    text = out.getvalue()
    assert renderer.exit_code == 0
    assert "\x1b[2;3m" in text  # dim italic thought
    assert "\x1b[1;34mAction: big[x]" in text  # bold blue action
    assert "\x1b[32mObservation: row" in text  # green observation


async def test_piped_output_is_plain_and_folds_long_observations() -> None:
    out = io.StringIO()
    await render(Console(file=out, force_terminal=False))
    text = out.getvalue()
    assert "\x1b[" not in text
    assert "Observation: row\nrow\nrow (+" in text
    assert "Answer: ok [1]" in text  # model text is never read as rich markup


def test_log_filter_redacts_secrets_in_messages_and_tracebacks() -> None:
    secret = "xoxb-very-secret-token"
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactSecrets([secret]))
    logger = logging.getLogger("test-redact")
    logger.addHandler(handler)
    try:
        logger.error("token is %s", secret)
        try:
            raise RuntimeError(f"bad {secret}")
        except RuntimeError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    assert secret not in stream.getvalue()
    assert stream.getvalue().count("***") == 2


def test_passwords_inside_endpoint_urls_count_as_secrets() -> None:
    from bot.config import load_config
    from bot.logs import secret_values

    config = load_config(None, {"REDIS_URL": "redis://:hunter2-pass@redis:6379/0"})
    assert "hunter2-pass" in secret_values(config)
