"""Slack's assistant surface (a thread in the assistant pane): the thread's title from its
question, the status line each event puts under it, and the loading messages Slack rotates
there while the bot works."""

from __future__ import annotations

from core.events import ActionDecided, AnswerDelta, Event, StepStarted

LOADING_MESSAGES = ("Reading the question…", "Thinking it through…", "Checking the sources…")
"""Rotated by Slack under an assistant thread's status while the bot works."""
TITLE_LIMIT = 80


def thread_title(question: str) -> str:
    """An assistant thread's title: the question on one line, shortened."""
    line = " ".join(question.split())
    return line if len(line) <= TITLE_LIMIT else line[: TITLE_LIMIT - 1].rstrip() + "…"


def assistant_status(event: Event) -> str | None:
    """The status line an event puts under an assistant thread (None: unchanged)."""
    match event:
        case StepStarted(step=n):
            return f"is thinking… (step {n})"
        case ActionDecided(name=name):
            plain = "".join(c for c in " ".join(name.split()) if c not in "<>&@")
            return f"is running {plain[:40]}…"
        case AnswerDelta():
            return "is writing the answer…"
        case _:
            return None
