"""Plain functions behind ``reactbot trace list|show|export``; the CLI only parses arguments."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from core.trace import Trace, summary_line, utc_iso

QUESTION_WIDTH = 60
_EXPORTERS = {".json": "json", ".md": "markdown", ".markdown": "markdown"}


def format_trace_list(traces: Sequence[Trace]) -> str:
    """One line per trace, newest first as given: id, time, status, question, totals."""
    if not traces:
        return "No stored traces."
    return "\n".join(_list_line(trace) for trace in traces)


def _list_line(trace: Trace) -> str:
    when = utc_iso(trace.started_at) if trace.started_at else "-"
    question = _shorten(trace.question)
    return f"{trace.id}  {when}  {trace.status:<11}  {question}  ({summary_line(trace)})"


def _shorten(text: str) -> str:
    one_line = " ".join(text.split())
    if len(one_line) <= QUESTION_WIDTH:
        return one_line
    return one_line[: QUESTION_WIDTH - 1] + "…"


def export_trace(trace: Trace, path: str | Path) -> Path:
    """Write ``trace`` as JSON (``.json``) or Markdown (``.md``); return the path written."""
    target = Path(path)
    kind = _EXPORTERS.get(target.suffix.lower())
    if kind is None:
        raise ValueError(f"cannot export a trace to {target.name!r}: use a .json or .md file name")
    text = trace.to_json(indent=2) + "\n" if kind == "json" else trace.to_markdown()
    target.write_text(text, encoding="utf-8")
    return target
