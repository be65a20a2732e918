"""What the bot says to people about their presses and commands: one sentence per meaning,
the same on every surface (issue 41).

A surface renders these (bold, mentions, its emoji codes) but never words its own: a
sentence written inside one surface is one the others lack or say differently. Names of
people come in already rendered by the surface (a Slack or Discord mention, a Telegram
name), or not at all ("the person who asked"). Refusals of a question (cooldown, budget,
room, access) are worded by the answering pipeline (``adapters.answering``,
``core.budgets``); these are the rest.
"""

from __future__ import annotations

from core.tools.base import ToolDisplay

__all__ = [
    "DECISION_GONE",
    "NOT_RUNNING",
    "NO_APPROVALS",
    "NO_TRACE",
    "ONLY_ADMINS",
    "RESET_ADMINS",
    "RESET_DONE",
    "RETRY_GONE",
    "UNSAVED",
    "acting",
    "decide_refused",
    "deciders",
    "now_sees",
    "stop_refused",
    "who_may_decide",
]

ASKER = "the person who asked"

NOT_RUNNING = "This answer is no longer running."
"""A Stop, or a decision, on a run that no process runs any more."""
DECISION_GONE = "This action was already decided, or its time ran out."
NO_APPROVALS = "Approvals are not set up on this bot."
RETRY_GONE = "I no longer have that question: please ask it again."
RESET_DONE = "🧹 I forgot this conversation."
RESET_ADMINS = "Only an admin can reset this conversation here."
NO_TRACE = "No trace yet in this conversation: ask me something first."
ONLY_ADMINS = "Only an admin can change the settings here."
UNSAVED = "⚠️ I could not save that: the shared store is unavailable. Try again soon."


def deciders(approvers: str, asker: str | None = None) -> str:
    """Who may decide on an action (``agent.approval.approvers``), in words: ``asker`` is
    the asker as the surface shows a person (a mention), or None."""
    if approvers == "anyone":
        return "anyone here"
    if approvers == "admins":
        return "an admin"
    return f"{asker or ASKER} or an admin"


def who_may_decide(approvers: str, asker: str | None = None) -> str:
    """The line under an action waiting for a person: ``only … can decide``."""
    who = deciders(approvers, asker)
    return f"{who} can decide" if approvers == "anyone" else f"only {who} can decide"


def stop_refused(asker: str | None = None) -> str:
    """Said privately to someone who pressed another person's Stop."""
    return f"Only {asker or ASKER} or an admin can stop this run."


def decide_refused(approvers: str, asker: str | None = None) -> str:
    """Said privately to someone who may not decide on an action."""
    return f"Only {deciders(approvers, asker)} can decide this."


def now_sees(shown: str) -> str:
    """After an admin changed what a place sees (``verbosity``): ``shown`` as the surface
    emphasises it (``**full**``, ``*full*``)."""
    return f"Here people now see: {shown}."


def acting(display: ToolDisplay | None, name: str) -> tuple[str, str]:
    """A tool at work: its own ``("🔎", "Searching")``, else ``("🛠️", "Running <name>")``
    with ``name`` already rendered (cut and escaped) by the surface."""
    if display is not None:
        return display.emoji, display.verb
    return "🛠️", f"Running {name}"
