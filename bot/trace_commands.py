"""Plain functions behind ``reactbot trace list|show|export|replay|diff``; the CLI only
parses arguments."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from adapters.terminal.render import TerminalRenderer, printable
from core.agent import Agent, Run
from core.errors import ReactbotError, StoreUnavailable
from core.events import ActionDecided, FinalEvent, Finished, Mode, ObservationReady
from core.llm import ChatModel
from core.replay import (
    DiffRow,
    DiffSide,
    ReplayingTools,
    TraceDiff,
    call_key,
    diff_traces,
    finish_replay,
    start_replay,
)
from core.trace import Trace, one_line, steps_made, summary_line, utc_iso

if TYPE_CHECKING:
    from bot.config import Config
    from bot.hosting import Host

QUESTION_WIDTH = 60
CONVERSATION_WIDTH = 64
_EXPORTERS = {".json": "json", ".md": "markdown", ".markdown": "markdown"}


def format_trace_list(traces: Sequence[Trace], *, conversations: bool = False) -> str:
    """One line per trace, newest first as given: id, time, status, question, totals, in
    columns that line up; with ``conversations``, each trace's conversation after its time
    (whole up to ``CONVERSATION_WIDTH``: a Slack thread's id fits)."""
    if not traces:
        return "No stored traces."
    rows = [_list_row(trace, conversations=conversations) for trace in traces]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]])
        for row in rows
    )


def _list_row(trace: Trace, *, conversations: bool) -> list[str]:
    when = utc_iso(trace.started_at) if trace.started_at else "-"
    where = [one_line(trace.conversation or "-", CONVERSATION_WIDTH)] if conversations else []
    question = one_line(trace.question, QUESTION_WIDTH)
    return [trace.id, when, *where, trace.status, question, f"({summary_line(trace)})"]


def export_trace(trace: Trace, path: str | Path) -> Path:
    """Write ``trace`` as JSON (``.json``) or Markdown (``.md``); return the path written."""
    target = Path(path)
    kind = _EXPORTERS.get(target.suffix.lower())
    if kind is None:
        raise ValueError(
            f"cannot export a trace to {str(target)!r}: the file name must end in .json "
            "(the whole trace, replayable) or .md / .markdown (to read)"
        )
    text = trace.to_json(indent=2) + "\n" if kind == "json" else trace.to_markdown()
    target.write_text(text, encoding="utf-8")
    return target


# ---- trace replay / trace diff ----------------------------------------------------------

NOT_KEPT_WITHOUT_REDIS = (
    "Without Redis, traces live only as long as the process that made them, so a new "
    "`reactbot` command cannot find them. Set REDIS_URL to keep them across commands."
)
PROMPT_CHARS = 100_000
"""A --prompt file longer than this is refused (it goes to the model with every step)."""
CELL_CHARS = 300
"""Characters of one text (thought, observation, ...) shown in a comparison cell."""
CELL_LINES = 6
ANSWER_CHARS = 600
SIDE_BY_SIDE_WIDTH = 60
"""Narrower consoles get the two runs one above the other, row by row."""
SHOWN_ROWS = 60
"""Rows a comparison prints; the rest is counted."""


class ReplayError(ReactbotError):
    """What stops ``trace replay`` before it starts, said in one line (exit 2)."""


def replay_model(app: Host, name: str | None) -> tuple[ChatModel, ChatModel | None, bool]:
    """The model a replay runs on: ``(steps model, answer model, opened here)``.

    Without ``--model``, the configured models. With it, a catalogue name (``models:``);
    any other name is taken as a model name on the configured endpoint.
    """
    if name is None:
        return app.model, app.agent.answer_model, False
    if name in app.catalogue:  # opened by the app, which closes it
        return app.catalogue[name], None, False
    if not app.config.model_configured:
        raise ReplayError(
            f"--model {name} needs a model endpoint: set REACTBOT_MODEL and OPENAI_API_KEY "
            "(or OPENAI_BASE_URL); without one, replays run on the offline demo model"
        )
    from bot.models import openai_model  # the same client settings as the configured model

    closers: list[Callable[[], Awaitable[None]]] = []
    return openai_model(app.config, name, closers), None, True


def read_prompt(path: str) -> str:
    """A --prompt file's text: a whole system prompt, ``{tools}`` standing for the tools."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReplayError(f"cannot read the prompt file {path}: {exc}") from exc
    if not text.strip():
        raise ReplayError(f"the prompt file {path} is empty")
    if len(text) > PROMPT_CHARS:
        raise ReplayError(
            f"the prompt file {path} is {len(text):,} characters long; the limit is "
            f"{PROMPT_CHARS:,}"
        )
    return text


async def find_trace(app: Host, trace_id: str, console: Console) -> Trace | None:
    """The stored trace, or None after saying why it is not there."""
    trace = await app.stores.traces.get(trace_id)
    if trace is not None:
        return trace
    if app.health is not None and app.health.degraded:
        console.print(
            printable(f"Cannot reach {app.health.name}: trace {trace_id} cannot be read."),
            style="red",
            markup=False,
        )
    else:
        console.print(printable(f"No stored trace with id {trace_id}."), style="red", markup=False)
        if not app.config.redis.configured:
            console.print(NOT_KEPT_WITHOUT_REDIS, style="dim", markup=False)
    return None


async def replay_command(
    app: Host,
    console: Console,
    trace_id: str,
    *,
    model_name: str | None = None,
    mode: Mode | None = None,
    prompt_file: str | None = None,
    live_tools: bool = False,
) -> int:
    """``reactbot trace replay``: 0 when the replay answered, 1 when it stopped or failed
    (or the trace is not found), 2 when it could not start (a bad --model or --prompt)."""
    original = await find_trace(app, trace_id, console)
    if original is None:
        return 1
    try:
        template = read_prompt(prompt_file) if prompt_file is not None else original.system_prompt
        model, answer_model, opened = replay_model(app, model_name)
    except ReplayError as exc:
        console.print(printable(str(exc)), style="red", markup=False)
        return 2
    try:
        known = len(app.notes)
        await app.start()  # MCP tools, for calls run live
        for note in app.notes[known:]:
            console.print(f"note: {note}", style="dim", markup=False, soft_wrap=False)
        replaying = ReplayingTools(
            app.tools,
            original,
            live=live_tools,
            approval_tools=app.agent.settings.approval_tools,
        )
        settings = replace(app.agent.settings, approval_tools=frozenset(), system_prompt=template)
        agent = Agent(model, replaying.registry, answer_model=answer_model, settings=settings)
        console.print(
            f"Replaying trace {original.id} on {model.name}; tool calls the original made are "
            "answered from its trace. The question is asked without the conversation's history.",
            style="dim",
            markup=False,
            soft_wrap=False,
        )
        run = start_replay(agent, original, replaying, mode=mode)
        final = await _show_replay(run, replaying, console)
    finally:
        if opened:
            await _close(model)
    replay = finish_replay(final.trace, replaying)
    if replaying.stopped is not None:
        hint = " (--live-tools runs it)" if replaying.stopped.why == "not_recorded" else ""
        why = printable(f"Why: {replay.reason}{hint}.")
        console.print(why, style="yellow", markup=False, soft_wrap=False)
    stored = f"Replay stored as trace {replay.id} (replay of {original.id})."
    try:
        await app.stores.traces.save(replay)
    except StoreUnavailable:
        stored = "The replay could not be stored: the trace store is unavailable."
    if app.health is not None and app.health.degraded:
        stored = f"Replay kept as trace {replay.id} in this process only: cannot reach {app.health.name}."
    console.print()
    render_diff(diff_traces(original, replay), console)
    console.print(stored, style="dim", markup=False, soft_wrap=False)
    print_page_link(app.config, console, original.id, replay.id)
    return 0 if isinstance(final, Finished) else 1


async def _show_replay(run: Run, replaying: ReplayingTools, console: Console) -> FinalEvent:
    """The replay streamed like ``ask``, each observation taken from the trace said so;
    Ctrl-C stops the replay (which is still compared and stored), not the program."""
    from adapters.terminal.chat import stopped_by_interrupt

    renderer = TerminalRenderer(console)
    inputs: dict[tuple[int, int], str] = {}
    with stopped_by_interrupt(run, renderer):
        async for event in run.events():
            renderer.handle(event)
            if isinstance(event, ActionDecided):
                inputs[(event.step, event.call)] = event.input
            elif isinstance(event, ObservationReady):
                key = call_key(event.name, inputs.get((event.step, event.call), ""))
                if key in replaying.replayed:
                    console.print("  ↺ replayed from the original trace", style="dim", markup=False)
    return await run.wait()


async def diff_command(app: Host, console: Console, left_id: str, right_id: str) -> int:
    """``reactbot trace diff A B``: 0 when both traces are found, else 1."""
    left = await find_trace(app, left_id, console)
    right = await find_trace(app, right_id, console) if left is not None else None
    if left is None or right is None:
        return 1
    render_diff(diff_traces(left, right), console)
    print_page_link(app.config, console, left.id, right.id)
    return 0


async def _close(model: ChatModel) -> None:
    aclose = getattr(model, "aclose", None)
    if aclose is not None:
        await aclose()


# ---- rendering a comparison -------------------------------------------------------------


def render_diff(diff: TraceDiff, console: Console) -> None:
    """The two runs side by side (one above the other on a narrow console), the first row
    that differs marked ``▶`` and the others that differ ``≠``; every text clipped, so any
    trace fits the console's width in a bounded number of lines."""
    rows = diff.rows[:SHOWN_ROWS] if len(diff.rows) <= SHOWN_ROWS else diff.rows[: SHOWN_ROWS - 1]
    if rows[-1] is not diff.rows[-1]:
        rows = (*rows, diff.rows[-1])  # the answer row is always shown
    hidden = len(diff.rows) - len(rows) + diff.omitted
    heads = (_run_head("A", diff.left), _run_head("B", diff.right))
    if console.width >= SIDE_BY_SIDE_WIDTH:
        _side_by_side(diff, rows, heads, console)
    else:
        _stacked(diff, rows, heads, console)
    if hidden:
        console.print(
            f"({hidden} more steps not shown)", style="dim", markup=False, soft_wrap=False
        )
    console.print(diff.summary(), style="bold", markup=False, soft_wrap=False)


def _side_by_side(
    diff: TraceDiff, rows: Sequence[DiffRow], heads: tuple[Text, Text], console: Console
) -> None:
    table = Table(
        box=box.ROUNDED if console.is_terminal else box.ASCII,
        expand=True,
        show_lines=True,
        header_style="bold",
    )
    table.add_column("step", no_wrap=True, width=8)
    table.add_column(heads[0], ratio=1, overflow="fold")
    table.add_column(heads[1], ratio=1, overflow="fold")
    for row in rows:
        table.add_row(_mark(diff, row), _cell(row.left, row), _cell(row.right, row))
    console.print(table, soft_wrap=False)


def _stacked(
    diff: TraceDiff, rows: Sequence[DiffRow], heads: tuple[Text, Text], console: Console
) -> None:
    console.print(heads[0], soft_wrap=False, overflow="fold")
    console.print(heads[1], soft_wrap=False, overflow="fold")
    for row in rows:
        console.print(_mark(diff, row), soft_wrap=False, overflow="fold")
        grid = Table.grid(padding=(0, 1))
        grid.add_column(width=1, no_wrap=True, style="bold")
        grid.add_column(overflow="fold")
        grid.add_row("A", _cell(row.left, row))
        grid.add_row("B", _cell(row.right, row))
        console.print(grid, soft_wrap=False)


def _run_head(name: str, trace: Trace) -> Text:
    head = Text(f"{name}: {_clip(trace.id, 40)}", style="bold")
    if trace.replay_of:
        head.append(f" (replay of {_clip(trace.replay_of, 40)})", style="dim")
    models = ", ".join(dict.fromkeys(trace.models)) or "?"
    prompt = "custom prompt" if trace.system_prompt is not None else "built-in prompt"
    head.append(f"\n{_clip(models, 80)} · {_clip(trace.mode, 10)} mode · {prompt}", style="dim")
    totals = f"{steps_made(trace)} steps · {trace.seconds:.1f} s"
    if trace.total_tokens:
        totals += f" · {trace.total_tokens:,} tokens"
    head.append(f"\n{_clip(trace.status, 20)} · {totals}", style="dim")
    return head


def _mark(diff: TraceDiff, row: DiffRow) -> Text:
    if diff.first is not None and diff.rows[diff.first] is row:
        return Text(f"▶ {row.label}", style="bold red")
    if row.differs:
        return Text(f"≠ {row.label}", style="yellow")
    return Text(f"  {row.label}")


def _cell(side: DiffSide | None, row: DiffRow) -> Text:
    if side is None:
        return Text("—", style="dim")
    changed = set(row.changes)
    out = Text()

    def part(label: str, text: str, style: str, *, chars: int = CELL_CHARS, key: str = "") -> None:
        if out:
            out.append("\n")
        out.append(label, style="bold underline" if key in changed else "bold")
        out.append(_clip(text, chars), style=style)

    if side.kind == "answer":
        part("Outcome: ", side.status, "", key="status")
        if side.answer is not None:
            part("Answer: ", side.answer, "bold", chars=ANSWER_CHARS, key="answer")
        if side.error:
            part("Reason: ", side.error, "yellow", key="error")
        return out
    if side.kind == "format_error":
        part("Format error: ", side.error or "unreadable reply", "yellow", key="kind")
        return out
    if side.thought:
        part("Thought: ", side.thought, "italic", key="thought")
    if side.action:
        call = f"{side.action}[{_clip(side.input or '', CELL_CHARS)}]"
        part("Action: ", call, "blue", key="action" if "action" in changed else "input")
    if side.observation is not None:
        label = "Observation (replayed): " if side.replayed else "Observation: "
        part(label, side.observation, "green", key="observation")
    elif side.error:
        part("Error: ", side.error, "yellow", key="error")
    meta = f"{side.seconds:.2f} s" + (f" · {side.tokens:,} tokens" if side.tokens else "")
    out.append(f"\n{meta}", style="dim")
    return out


def _clip(text: str, chars: int, *, lines: int = CELL_LINES) -> str:
    """At most ``chars`` characters and ``lines`` lines, control characters made visible."""
    kept = text[: chars * 2].splitlines()[:lines]
    shown = "\n".join(kept)
    if len(shown) > chars:
        shown = shown[:chars]
    if len(shown) < len(text.rstrip()):
        shown = shown.rstrip() + f"… (+{len(text) - len(shown):,} chars)"
    return printable(shown)


# ---- page links -----------------------------------------------------------------------------


def print_page_link(config: Config, console: Console, *ids: str) -> None:
    """The signed link to a trace's page (one id) or to two runs side by side (two), when
    ``web.public_url`` is set; else nothing. Why there is none, when pages are half set up."""
    if config.web.public_url is None:
        return
    from bot.web import LinkSigner  # Jinja2 and the server load only when links are on

    signer = LinkSigner.from_config(config)
    link = signer.link(ids[0]) if len(ids) == 1 else signer.compare_link(ids[0], ids[1])
    what = "Page" if len(ids) == 1 else "Side by side"
    if link is not None:
        lifetime = _lifetime(config.web.link_ttl)
        console.print(f"{what}: {link}  (valid {lifetime})", markup=False, soft_wrap=True)
    elif config.secrets.link_secret is None:
        console.print("No page link: REACTBOT_LINK_SECRET is not set.", style="dim", markup=False)
    elif not config.ops.enabled:
        console.print(
            "No page link: ops.enabled is false (the ops server serves the pages).",
            style="dim",
            markup=False,
        )
    else:
        console.print("No page link: web.enabled is false.", style="dim", markup=False)


def _lifetime(seconds: int) -> str:
    """``604800`` -> ``7 days``; ``3600`` -> ``1 hour``; ``90`` -> ``1 minute``."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = round(seconds / size, 1)
            shown = f"{count:g}"
            return f"{shown} {unit}{'' if shown == '1' else 's'}"
    return f"{seconds} seconds"
