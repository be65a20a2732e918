"""The fifth surface's renderer: a run's view as plain text and buttons as data.

Every line a person reads comes from ``adapters.live`` (the status line, the final mark)
and ``adapters.words``; what the model wrote is clipped, never interpreted (the platform
has no markup, so nothing in it can ping anyone or hide a link)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from adapters import words
from adapters.live import ANSWER_PHASES, RunView, approval_words, final_mark, status_line
from core.trace import Trace
from tests.conformance.fifth.platform import MESSAGE_CHARS, Button

FIELD_CHARS = 600


@dataclass(frozen=True, slots=True)
class Post:
    text: str
    buttons: tuple[Button, ...] = ()


def clip(text: str, limit: int) -> str:
    text = text.strip() or "…"
    return text if len(text) <= limit else text[: limit - 1] + "…"


class PlainRenderer:
    """``adapters.live.Renderer[Post]`` for one run's message."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def live(self, view: RunView) -> Post:
        lines = self._steps(view) if view.verbosity == "full" else []
        lines.append(status_line(view, time.monotonic(), still_while_pending=True))
        pending = view.pending
        if pending is None:
            return Post(_joined(lines), (Button(str(words.BUTTONS["stop"]), "stop", self.run_id),))
        lines.append(f"✋ {clip(pending.name, 80)}[{clip(pending.input, FIELD_CHARS)}]")
        lines.append(words.who_may_decide(view.approvers))
        ref = f"{self.run_id}:{pending.step}:{pending.call}"
        verdicts = ("approve", "edit", "deny") + (("always",) if pending.remember else ())
        return Post(_joined(lines), tuple(Button(str(words.BUTTONS[v]), v, ref) for v in verdicts))

    def final(self, view: RunView) -> Post:
        lines = self._steps(view) if view.verbosity == "full" else []
        return self._ended(view, lines)

    def compact(self, view: RunView) -> Post:
        return self._ended(view, [])

    def _ended(self, view: RunView, lines: list[str]) -> Post:
        if view.phase in ANSWER_PHASES and view.answer:
            lines.append(clip(view.answer, MESSAGE_CHARS // 2))
        elif view.phase == "cancelled":
            shown = words.stopped(view.stopped_by, view.steps_made, shown=lambda w: clip(w, 80))
            lines.append(f"⏹️ {shown}")
        else:
            lines.append(clip(view.reason or view.phase, FIELD_CHARS))
        lines.append(f"{final_mark(view.phase)} {view.elapsed():.1f} s")
        votes = tuple(
            Button(str(words.BUTTONS[v]), f"vote:{v}", self.run_id) for v in ("up", "down")
        )
        return Post(_joined(lines), votes)

    def trace_posts(
        self, trace: Trace, *, whole_answer: bool = False, steps: bool = True
    ) -> list[Post]:
        posts = [Post(clip(trace.answer or "…", MESSAGE_CHARS))] if whole_answer else []
        if steps:
            posts.append(Post(clip(trace.to_markdown(), MESSAGE_CHARS)))
        return posts

    def plain(self, text: str) -> Post:
        return Post(clip(text, MESSAGE_CHARS))

    @staticmethod
    def _steps(view: RunView) -> list[str]:
        lines: list[str] = []
        for step in view.steps[-5:]:
            if step.thought:
                lines.append(f"💭 {clip(step.thought, FIELD_CHARS)}")
            if step.action:
                lines.append(
                    f"🔧 {clip(step.action, 80)}[{clip(step.action_input or '', FIELD_CHARS)}]"
                )
            if step.approval is not None:
                lines.append(approval_words(step.approval))
            if step.observation is not None:
                lines.append(f"👁 {clip(step.observation, FIELD_CHARS)}")
        return lines


def _joined(lines: list[str]) -> str:
    return clip("\n".join(lines), MESSAGE_CHARS)
