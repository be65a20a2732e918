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

from rich.cells import cell_len, get_character_cell_size
from rich.console import Console
from rich.text import Text

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
from core.trace import steps_made, summary_line

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


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""Control characters, and the bidirectional controls that would reorder what follows."""


def printable(text: str) -> str:
    """Control characters (ESC included) as visible symbols; newlines and tabs stay."""
    return _CONTROL.sub(_picture, text)


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # the Unicode "control pictures": ␛ for ESC
    return "␡" if code == 0x7F else "\ufffd"


_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def fold(text: str, *, lines: int = 3, width: int = 300) -> str:
    """First few lines of a long observation, and how much was left out; a code fence the
    cut leaves open is closed, so the preview never swallows what follows it."""
    kept = text.splitlines()[: max(1, lines)]
    shown = "\n".join(kept)
    if len(shown) > width:
        shown = shown[: max(1, width)].rstrip() + "…"
    hidden = len(text) - len(shown)
    opened = open_fence(shown)
    if opened is not None:
        shown += "\n" + opened
    return shown + (f" (+{hidden} chars)" if hidden > 0 else "")


def open_fence(text: str) -> str | None:
    """The marker of the code fence ``text`` leaves open (CommonMark: closed by a line of
    at least as many of the same character), or None."""
    opened: str | None = None
    for line in text.splitlines():
        found = _FENCE.match(line)
        if found is None:
            continue
        marker = found.group(1)
        if opened is None:
            opened = marker
        elif (
            marker[0] == opened[0]
            and len(marker) >= len(opened)
            and not line[found.end() :].strip()
        ):
            opened = None
    return opened


class WordWrap:
    """Breaks streamed text into lines of at most ``width`` cells, at spaces where it can
    (a word longer than a line is cut; CJK text, which has no spaces, breaks between
    characters). The end of the last word is held back until it is known to end, since it
    may yet have to move to the next line: ``flush`` gives it."""

    def __init__(self, width: int, *, column: int = 0) -> None:
        self.width = max(2, width)  # a wide character takes two cells
        self.column = min(max(0, column), self.width)
        self._word: list[str] = []
        self._word_cells = 0
        self._spaces = 0

    def feed(self, text: str) -> str:
        out: list[str] = []
        for char in text:
            if char == "\n":
                self._place_word(out)
                self._spaces = 0  # spaces at the end of a line are not worth a cell
                out.append("\n")
                self.column = 0
            elif char in " \t":
                self._place_word(out)
                self._spaces += 1
            else:
                cells = get_character_cell_size(char)
                if cells > 1:  # a wide (CJK) character: a line may break on either side
                    self._place_word(out)
                    self._place(out, char, cells)
                    continue
                self._word.append(char)
                self._word_cells += cells
                if self._word_cells >= self.width:
                    self._place_word(out)
        return "".join(out)

    def flush(self) -> str:
        out: list[str] = []
        self._place_word(out)
        self._spaces = 0
        return "".join(out)

    def _place_word(self, out: list[str]) -> None:
        if not self._word:
            return
        word, cells = "".join(self._word), self._word_cells
        self._word.clear()
        self._word_cells = 0
        self._place(out, word, cells)

    def _place(self, out: list[str], piece: str, cells: int) -> None:
        """``piece`` after the spaces before it, or at the start of the next line (the
        spaces then become the line break)."""
        if self.column > 0 and self.column + self._spaces + cells > self.width:
            out.append("\n")
            self.column = 0
        elif self._spaces:
            spaces = min(self._spaces, self.width - cells - self.column)
            out.append(" " * spaces)
            self.column += spaces
        self._spaces = 0
        out.append(piece)
        self.column += cells


class TerminalRenderer:
    """Consumes the event stream of one run; ``exit_code`` is set when the run ends.

    On a terminal, lines wrap at word boundaries (streamed text too); piped output is
    never wrapped, so it can be grepped. Text the model writes before any label is held
    until the reply shows what it is: a thought (an action or answer follows) or a reply
    with no usable format (shown as such, never as a Thought)."""

    def __init__(self, console: Console, *, fold_lines: int = 3) -> None:
        self.console = console
        self.fold_lines = fold_lines
        self.exit_code: int | None = None
        self._open: str | None = None  # the label whose text is streaming right now
        self._max_steps = 0
        self._unlabelled: list[str] = []
        self._wrap: WordWrap | None = None

    def handle(self, event: Event) -> None:
        if self._unlabelled:
            self._settle_unlabelled(event)
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
            case ThoughtDelta(text=text, labelled=False):
                self._unlabelled.append(text)
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
                from adapters.live import approval_words  # with a decision, not at start-up

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
                steps = steps_made(event.trace)
                after = f"after step {steps}" if steps else "before the first step"
                self._line(f"⏹ Stopped{who} {after}.", "warning")
                self.exit_code = 130
            case _:
                assert_never(event)

    def interrupted(self) -> None:
        """Ctrl-C was pressed: the terminal echoed ``^C`` where the cursor was, so what
        comes next (the stop notice) starts on a line of its own. Piped output has no ``^C``
        in it: the notice's own line break is enough there."""
        if self._open is not None:
            self._close()
        elif self.console.is_terminal:
            self.console.print()

    def _settle_unlabelled(self, event: Event) -> None:
        """Unlabelled text meets the event that says what it was."""
        if isinstance(event, ThoughtDelta) and not event.labelled:
            return
        if isinstance(event, (UsageCounted, Notice)):
            return  # says nothing about the reply's format
        text, self._unlabelled = "".join(self._unlabelled), []
        if isinstance(event, FormatRetry):
            self._line(f"Unformatted reply: {text.strip()}", "meta")
        elif isinstance(event, Finished) and event.status == "unformatted":
            pass  # the final answer shows it, labelled as unformatted
        elif text.strip():
            self._stream("Thought", text, "thought")

    def _finished(self, event: Finished) -> None:
        trace = event.trace
        mark, style = "✓", "ok"
        if event.status == "unformatted":
            self._line(
                "⚠ The model's reply did not follow the format; here it is unformatted:", "warning"
            )
            self._line(event.answer, "answer")
            mark, style = "⚠", "warning"
        elif event.status == "refused":
            if self._open != "Answer":
                self._line(f"Answer: {event.answer}", "answer")
            mark, style = "🚫", "warning"
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
        self._line(f"{mark} {summary_line(trace)}", style)
        self.exit_code = 0

    # ---- output helpers -----------------------------------------------------------------
    def _stream(self, label: str, text: str, style: str) -> None:
        if self._open != label:
            self._close()
            head = f"{label}: "
            self.console.print(Text(head, style=STYLES[style]), end="")
            text = text.lstrip()
            self._open = label
            if self.console.is_terminal:
                self._wrap = WordWrap(self.console.width, column=cell_len(head))
        shown = printable(text)
        if self._wrap is not None:
            shown = self._wrap.feed(shown)
        if shown:
            self.console.print(Text(shown, style=STYLES[style]), end="")

    def _close(self) -> None:
        if self._open is not None:
            if self._wrap is not None:
                rest = self._wrap.flush()
                if rest:
                    self.console.print(Text(rest, style=STYLES[self._open_style()]), end="")
                self._wrap = None
            self.console.print()
            self._open = None

    def _open_style(self) -> str:
        return {"Thought": "thought", "Reasoning": "reasoning", "Answer": "answer"}.get(
            self._open or "", "meta"
        )

    def _line(self, text: str, style: str) -> None:
        self._close()
        # On a terminal rich wraps whole lines at word boundaries; piped, lines stay whole.
        wrap = self.console.is_terminal
        self.console.print(Text(printable(text), style=STYLES[style]), soft_wrap=not wrap)
