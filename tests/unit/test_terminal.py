"""Terminal rendering: styles on a TTY, plain when piped, folding, secret redaction in logs."""

from __future__ import annotations

import io
import logging

from rich.console import Console

from adapters.terminal.render import TerminalRenderer, fold
from bot.logs import RedactSecrets
from core.agent import Agent
from core.scripted import ScriptedModel, Turn
from core.tools import FunctionTool, ToolRegistry
from core.trace import Trace


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


async def stopped_in_step_two(written: str) -> tuple[str, Trace]:
    """Ctrl-C while the model's second reply hangs after ``written`` (maybe nothing)."""
    from core.events import StepStarted, ThoughtDelta

    model = ScriptedModel(
        [
            Turn("Thought: look\nAction: big[x]"),
            Turn(written or "Thought: never sent", chunk_size=4, stall_after=4 if written else 0),
        ]
    )

    async def big(arg: str) -> str:
        return "row"

    tools = ToolRegistry()
    tools.add(FunctionTool("big", big, "Big.", "big[x]"))
    out = io.StringIO()
    renderer = TerminalRenderer(Console(file=out, force_terminal=False))
    run = Agent(model, tools).start("q")
    async for event in run.events():
        renderer.handle(event)
        began = ThoughtDelta if written else StepStarted
        if isinstance(event, began) and event.step == 2:
            run.cancel("you (Ctrl-C)")
    return out.getvalue(), (await run.wait()).trace


async def test_a_stop_counts_the_steps_the_footer_and_the_trace_count() -> None:
    """An open step the model had written nothing in when Ctrl-C came is not a step anyone
    saw: "after step 1", as the footer's "1 step"; one it had begun to write counts."""
    from core.trace import steps_made, summary_line

    shown, trace = await stopped_in_step_two("")
    assert "⏹ Stopped by you (Ctrl-C) after step 1." in shown, shown
    assert summary_line(trace).startswith("1 step ·") and steps_made(trace) == 1
    shown, trace = await stopped_in_step_two("Thought: I am thinking")
    assert "⏹ Stopped by you (Ctrl-C) after step 2." in shown, shown
    assert summary_line(trace).startswith("2 steps ·")


async def test_a_reply_cut_off_in_tools_or_json_mode_keeps_what_was_shown() -> None:
    from core.agent import AgentSettings
    from core.events import AnswerDelta, ThoughtDelta
    from core.trace import steps_made

    replies = {  # tools mode holds a short text back (thought or answer?): this one shows
        "tools": "Let me think about this one. " * 10,
        "json": '{"thought": "Let me think about this one", "action": "fin',
    }
    for mode, text in replies.items():
        chunks = 70 if mode == "tools" else 6
        model = ScriptedModel([Turn(text, chunk_size=4, stall_after=chunks)])
        agent = Agent(model, ToolRegistry(), settings=AgentSettings(model_timeout=3.0))
        run = agent.start("q", mode=mode)  # type: ignore[arg-type]
        async for event in run.events():
            if isinstance(event, ThoughtDelta | AnswerDelta):
                run.cancel("you (Ctrl-C)")
        trace = (await run.wait()).trace
        assert trace.status == "cancelled" and steps_made(trace) == 1, mode
        step = trace.steps[0]  # what had arrived when Stop came: a thought begun
        assert step.thought.startswith("Let me thin") and text.startswith(step.raw), (mode, step)
        assert step.thought.strip() in text and step.error == "cancelled", mode
