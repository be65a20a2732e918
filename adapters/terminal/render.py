"""Renders core events to a terminal: styled on a TTY, plain text when piped.

Thought dim italic, Action bold blue, Observation green (folded), Answer bold and highlighted.
Model text is printed as ``rich.text.Text``, never as markup, so it cannot inject styles, and
its control characters are shown as symbols (``␛``), never sent: rich passes ESC through, so a
web page could otherwise clear the screen, retitle the window or plant a clickable OSC 8
link whose text hides where it goes.
"""

from __future__ import annotations

import re
from typing import assert_never

from rich.console import Console
from rich.text import Text

from adapters.live import approval_words
from core.events import (
    ActionDecided,
    AnswerDelta,
    ApprovalDecided,
    ApprovalRequested,
    Cancelled,
    Event,
    Failed,
    Finished,
    FormatRetry,
    Notice,
    ObservationReady,
    ReasoningDelta,
    RunStarted,
    StepStarted,
    ThoughtDelta,
    UsageCounted,
)
from core.trace import summary_line

STYLES = {
    "thought": "dim italic",
    "reasoning": "dim",
    "action": "bold blue",
    "observation": "green",
    "answer": "bold black on bright_yellow",
    "warning": "yellow",
    "error": "bold red",
    "ok": "bold green",
    "meta": "dim",
}


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """Control characters (ESC included) as visible symbols; newlines and tabs stay."""
    return _CONTROL.sub(_picture, text)


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # the Unicode "control pictures": ␛ for ESC
    return "␡" if code == 0x7F else "\ufffd"


def fold(text: str, *, lines: int = 3, width: int = 300) -> str:
    """First few lines of a long observation, and how much was left out."""
    kept = text.splitlines()[:lines]
    shown = "\n".join(kept)
    if len(shown) > width:
        shown = shown[:width].rstrip() + "…"
    hidden = len(text) - len(shown)
    return shown + (f" (+{hidden} chars)" if hidden > 0 else "")


class TerminalRenderer:
    """Consumes the event stream of one run; ``exit_code`` is set when the run ends."""

    def __init__(self, console: Console, *, fold_lines: int = 3) -> None:
        self.console = console
        self.fold_lines = fold_lines
        self.exit_code: int | None = None
        self._open: str | None = None  # the label whose text is streaming right now
        self._max_steps = 0

    def handle(self, event: Event) -> None:
        match event:
            case RunStarted(max_steps=max_steps):
                self._max_steps = max_steps
            case StepStarted(kind="answer"):
                self._line("(the answer model writes the final answer)", "meta")
            case StepStarted(kind="best_effort"):
                self._line(
                    "(steps ran out: asking for the best answer from what was found)", "meta"
                )
            case StepStarted():
                pass
            case ThoughtDelta(text=text):
                self._stream("Thought", text, "thought")
            case ReasoningDelta(text=text):
                self._stream("Reasoning", text, "reasoning")
            case AnswerDelta(text=text):
                self._stream("Answer", text, "answer")
            case ActionDecided(name=name, input=arg):
                self._line(f"Action: {name}[{arg}]", "action")
            case ApprovalRequested(name=name, input=arg):
                self._line(f"✋ {name}[{arg}] needs a person's approval", "warning")
            case ApprovalDecided():
                self._line(f"  {approval_words(event)}", "meta")
            case ObservationReady(text=text, error=error):
                style = "warning" if error else "observation"
                self._line(f"Observation: {fold(text, lines=self.fold_lines)}", style)
            case FormatRetry(attempt=attempt, reason=reason):
                self._line(
                    f"⚠ The reply did not follow the format ({reason}); re-asking ({attempt}).",
                    "warning",
                )
            case UsageCounted():
                pass
            case Notice(text=text):
                self._line(f"… {text}", "warning")
            case Finished():
                self._finished(event)
            case Failed(reason=reason):
                self._line(f"✗ {reason}", "error")
                self._line(summary_line(event.trace), "meta")
                self.exit_code = 1
            case Cancelled(by=by):
                who = f" by {by}" if by else ""
                self._line(f"⏹ Stopped{who} after step {event.trace.step_count}.", "warning")
                self.exit_code = 130
            case _:
                assert_never(event)

    def _finished(self, event: Finished) -> None:
        trace = event.trace
        if event.status == "unformatted":
            self._line(
                "⚠ The model's reply did not follow the format; here it is unformatted:", "warning"
            )
            self._line(event.answer, "answer")
        elif event.status == "best_effort":
            self._line(
                f"⚠ Stopped after {self._max_steps} steps without a final answer. "
                "Best answer from what was found:",
                "warning",
            )
            self._line(event.answer, "answer")
        elif self._open != "Answer":
            self._line(f"Answer: {event.answer}", "answer")
        self._close()
        if trace.cited:
            self._line("Sources: " + ", ".join(trace.cited), "meta")
        self._line(f"✓ {summary_line(trace)}", "ok")
        self.exit_code = 0

    # ---- output helpers -----------------------------------------------------------------
    def _stream(self, label: str, text: str, style: str) -> None:
        if self._open != label:
            self._close()
            self.console.print(Text(f"{label}: ", style=STYLES[style]), end="")
            text = text.lstrip()
            self._open = label
        self.console.print(Text(printable(text), style=STYLES[style]), end="")

    def _close(self) -> None:
        if self._open is not None:
            self.console.print()
            self._open = None

    def _line(self, text: str, style: str) -> None:
        self._close()
        self.console.print(Text(printable(text), style=STYLES[style]))
