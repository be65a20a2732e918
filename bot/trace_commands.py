"""Plain functions behind ``reactbot trace list|show|export``; the CLI only parses arguments."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from core.trace import Trace, summary_line, utc_iso

QUESTION_WIDTH = 60
CONVERSATION_WIDTH = 30
_EXPORTERS = {".json": "json", ".md": "markdown", ".markdown": "markdown"}


def format_trace_list(traces: Sequence[Trace], *, conversations: bool = False) -> str:
    """One line per trace, newest first as given: id, time, status, question, totals;
    with ``conversations``, each trace's conversation after its time."""
    if not traces:
        return "No stored traces."
    return "\n".join(_list_line(trace, conversations=conversations) for trace in traces)


def _list_line(trace: Trace, *, conversations: bool) -> str:
    when = utc_iso(trace.started_at) if trace.started_at else "-"
    question = _shorten(trace.question)
    where = f"  {_shorten(trace.conversation or '-', CONVERSATION_WIDTH)}" if conversations else ""
    return f"{trace.id}  {when}{where}  {trace.status:<11}  {question}  ({summary_line(trace)})"


def _shorten(text: str, width: int = QUESTION_WIDTH) -> str:
    one_line = " ".join(text.split())
    if len(one_line) <= width:
        return one_line
    return one_line[: width - 1] + "…"


def export_trace(trace: Trace, path: str | Path) -> Path:
    """Write ``trace`` as JSON (``.json``) or Markdown (``.md``); return the path written."""
    target = Path(path)
    kind = _EXPORTERS.get(target.suffix.lower())
    if kind is None:
        raise ValueError(f"cannot export a trace to {target.name!r}: use a .json or .md file name")
    text = trace.to_json(indent=2) + "\n" if kind == "json" else trace.to_markdown()
    target.write_text(text, encoding="utf-8")
    return target
