"""A run as Slack agent-streaming chunks (``chat.startStream`` / ``appendStream`` /
``stopStream`` with ``task_display_mode: plan``): pure functions of ``adapters.live.RunView``.

- each step is a ``task_update`` chunk: ``title`` the action (``search: reactbot docs``),
  ``status`` ``pending`` -> ``in_progress`` -> ``complete`` or ``error``, ``details`` the
  thought, ``output`` the folded observation, ``sources`` the step's URLs;
- the answer is ``markdown_text``, appended as it grows (never in the same call as chunks);
- at stop: a context line with the totals and ``context_actions`` with ``feedback_buttons``.

Outside text is made safe one character at a time (``safe_markdown``), so a delta rendered
alone equals the same slice of the whole text rendered: ``<``, ``>`` and ``&`` become
entities (no ``<!channel>``, ``<@U…>`` or ``<url|label>``), a zero-width space follows every
``]`` (no ``[label](url)`` masked link) and every ``@`` (no ``@channel`` / ``@here``).
Every field is clamped to Slack's limit: 256 characters for a task's title, details and
output, 12,000 for ``markdown_text``.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterator
from typing import Any, Literal

from adapters import words
from adapters.live import ANSWER_PHASES, REFUSED_NOTE, RunView, StepView, approval_words
from adapters.words import BUTTONS
from core.pricing import format_usd
from core.text import neutral_bidi
from core.trace import source_domain

TaskStatus = Literal["pending", "in_progress", "complete", "error"]
Chunk = dict[str, Any]

TASK_FIELD = 256
"""A task_update's ``title``, ``details`` and ``output`` (and a plan_update's ``title``)."""
MARKDOWN_LIMIT = 12_000
"""``markdown_text`` per call: "Limit this field to 12,000 characters"."""
MAX_SOURCES = 5
"""Sources shown per task (ours: a card, not a bibliography; the trace keeps them all)."""
SOURCE_URL_LIMIT = 500
"""Longer URLs are left out of a card (they are in the trace)."""
FEEDBACK_ACTION_ID = "reactbot_feedback"
ELLIPSIS = "…"
ZWSP = "\u200b"

_SAFE_URL = re.compile(r"^https?://[^\s<>|\[\]()]+$")
_HOST = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]{1,5})?$")
_MAP = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "]": "]" + ZWSP, "@": "@" + ZWSP}
_UNSAFE = re.compile(r"[&<>\]@]")


def safe_markdown(text: str) -> str:
    """Outside text for Slack markdown: no mention, no broadcast, no masked link, no
    bidirectional control (one character for one)."""
    return neutral_bidi(_UNSAFE.sub(lambda m: _MAP[m.group(0)], text))


def rendered_len(text: str) -> int:
    """``len(safe_markdown(text))``, without building it."""
    return (
        len(text)
        + 4 * text.count("&")
        + 3 * (text.count("<") + text.count(">"))
        + text.count("]")
        + text.count("@")
    )


def fitting_end(text: str, start: int, room: int) -> int:
    """The largest ``end`` with ``text[start:end]`` rendered in ``room`` characters (at least
    one character past ``start`` while there is text, so callers always move on)."""
    low, high = start, min(len(text), start + max(room, 0))  # a character renders to >= 1
    while low < high:
        mid = (low + high + 1) // 2
        if rendered_len(text[start:mid]) <= room:
            low = mid
        else:
            high = mid - 1
    return max(low, min(start + 1, len(text)))


def clamp(text: str, limit: int) -> str:
    """``text`` made safe in at most ``limit`` characters (cut with "…" when longer)."""
    limit = max(limit, 1)
    head = text[: limit + 1]  # a character renders to at least one: the rest cannot fit
    if len(head) <= limit and rendered_len(head) <= limit:
        return safe_markdown(head)
    end = fitting_end(head, 0, limit - len(ELLIPSIS))
    kept = safe_markdown(head[:end]) if rendered_len(head[:end]) <= limit - 1 else ""
    return kept.rstrip() + ELLIPSIS


def one_line(text: str, limit: int = 4 * TASK_FIELD) -> str:
    """The start of ``text`` on one line (whitespace runs as one space), bounded."""
    return " ".join(text[: limit * 4].split())[:limit]


def markdown_pieces(text: str, limit: int = MARKDOWN_LIMIT) -> Iterator[str]:
    """``text`` made safe, in pieces of at most ``limit`` characters each (in order; never an
    entity or a zero-width pair split across two pieces). Nothing for empty text."""
    limit = max(limit, 8)  # room for the longest rendering of one character
    start = 0
    while start < len(text):
        end = fitting_end(text, start, limit)
        yield safe_markdown(text[start:end])
        start = end


# ---- tasks --------------------------------------------------------------------------------


def task_id(step: StepView) -> str:
    return f"step-{step.index}" if not step.call else f"step-{step.index}-{step.call}"


def task_title(step: StepView) -> str:
    """``search: reactbot docs``; ``thinking`` before the step has an action."""
    if step.action is None:
        return f"{step.index} · thinking"
    name, arg = one_line(step.action), one_line(step.action_input or "")
    title = clamp(f"{name}: {arg}" if arg else name, TASK_FIELD)
    return title or f"{step.index} · (no action name)"


def task_status(step: StepView, view: RunView, *, last: bool) -> TaskStatus:
    if step.action is not None and step.done:
        return "error" if step.error else "complete"
    if not last or view.phase in ANSWER_PHASES:
        return "complete"  # a step without an action that the run moved past
    if view.is_final:
        return "error"  # failed or stopped while this step was going
    return "in_progress"


def task_output(step: StepView) -> str | None:
    """The observation folded: its first lines, and how much more there was."""
    if step.observation is None:
        return None
    body = step.observation.strip()
    if not body:
        return "(empty)"
    lines = body[: TASK_FIELD * 8].splitlines()[:3]
    head = " · ".join(one_line(line) for line in lines if line.strip())
    total = body.count("\n") + 1
    more = f" (+{total - 3:,} lines)" if total > 3 else ""
    return clamp(head, TASK_FIELD - len(more)) + more


def task_details(step: StepView) -> str | None:
    parts = [one_line(step.thought or step.reasoning)]
    if step.approval is not None:
        parts.append(approval_words(step.approval))
    text = " · ".join(p for p in parts if p)
    return clamp(text, TASK_FIELD) if text else None


def task_sources(step: StepView) -> list[Chunk]:
    sources: list[Chunk] = []
    for url in step.sources:
        if len(url) > SOURCE_URL_LIMIT or not _SAFE_URL.match(url):
            continue
        netloc = urllib.parse.urlsplit(url).netloc
        if "@" in netloc or not _HOST.match(netloc):
            continue
        sources.append({"type": "url", "url": url, "text": clamp(source_domain(url), 100)})
        if len(sources) == MAX_SOURCES:
            break
    return sources


def task_chunk(step: StepView, view: RunView, *, last: bool, detailed: bool = True) -> Chunk:
    chunk: Chunk = {
        "type": "task_update",
        "id": task_id(step),
        "title": task_title(step),
        "status": task_status(step, view, last=last),
    }
    if detailed:
        details, output, sources = task_details(step), task_output(step), task_sources(step)
        if details:
            chunk["details"] = details
        if output:
            chunk["output"] = output
        if sources:
            chunk["sources"] = sources
    return chunk


def task_chunks(view: RunView) -> list[Chunk]:
    """One task per step that did something: every step with an action, and the step being
    thought about now. ``compact`` verbosity: titles and statuses only; ``answer``: none."""
    if view.verbosity == "answer":
        return []
    detailed = view.verbosity == "full"
    chunks: list[Chunk] = []
    for i, step in enumerate(view.steps):
        last = i == len(view.steps) - 1
        if step.action is None and not (last and not view.is_final and not view.answer):
            continue  # a final answer step is the answer itself, not a task
        chunks.append(task_chunk(step, view, last=last, detailed=detailed))
    return chunks


def plan_title(view: RunView) -> str:
    return clamp("Plan: " + one_line(view.question), TASK_FIELD) if view.question else "Plan"


# ---- the end ------------------------------------------------------------------------------


def ending_markdown(view: RunView) -> str:
    """What a failed or stopped run adds below whatever was streamed (already safe)."""
    if view.phase == "cancelled":
        shown = words.stopped(view.stopped_by, view.steps_made, shown=lambda w: clamp(w, 60))
        return f"\n\n⏹️ {shown}"
    if view.phase == "failed":
        return "\n\n❌ " + clamp(view.reason or "The run failed.", 600)
    if view.phase == "refused":
        return f"\n\n🚫 {REFUSED_NOTE[0].upper()}{REFUSED_NOTE[1:]}."
    if view.phase == "best_effort":
        return "\n\n⚠️ Stopped before a final answer; this is the best answer from what was found."
    return ""


def totals_line(view: RunView) -> str:
    steps = sum(1 for s in view.steps if s.action is not None and not s.call)
    parts = [f"{steps} step{'s' if steps != 1 else ''}", f"{view.elapsed():.1f} s"]
    if view.tokens:
        parts.append(f"{view.tokens:,} tokens")
    if view.trace is not None and view.trace.cost_usd is not None:
        parts.append(format_usd(view.trace.cost_usd))
    if view.model:
        parts.append(clamp(view.model, 60))
    if view.trace is not None and view.trace.persona:
        parts.append("channel persona")
    return " · ".join(parts)


def stop_blocks(view: RunView, run_id: str) -> list[Chunk]:
    """Below the finished message: the totals, then 👍 / 👎 (recorded on the trace)."""
    mark = {"answered": "✅", "cancelled": "⏹️", "failed": "❌"}.get(view.phase, "⚠️")
    blocks: list[Chunk] = [
        {"type": "context", "elements": [{"type": "mrkdwn", "text": f"{mark} {totals_line(view)}"}]}
    ]
    if run_id:
        blocks.append(feedback_block(run_id))
    return blocks


def feedback_block(run_id: str) -> Chunk:
    """👍 / 👎 under a finished answer (streamed, or kept current with chat.update): a press
    is a ``Vote`` for the shared handler (``adapters.dispatch``)."""
    return {
        "type": "context_actions",
        "elements": [
            {
                "type": "feedback_buttons",
                "action_id": FEEDBACK_ACTION_ID,
                "positive_button": {
                    "text": {"type": "plain_text", "text": str(BUTTONS["up"])},
                    "accessibility_label": "This answer was helpful",
                    "value": f"up:{run_id}",
                },
                "negative_button": {
                    "text": {"type": "plain_text", "text": str(BUTTONS["down"])},
                    "accessibility_label": "This answer was not helpful",
                    "value": f"down:{run_id}",
                },
            }
        ],
    }


def parse_feedback(value: str) -> tuple[Literal["up", "down"], str] | None:
    """``up:<run id>`` -> ``("up", run id)``; None for anything that is not ours."""
    vote, _, run_id = value.partition(":")
    if vote not in ("up", "down") or not run_id or len(run_id) > 64:
        return None
    return ("up" if vote == "up" else "down"), run_id
