"""A run as the web chat shows it: one JSON document per state, which the page draws.

The page builds every element with ``textContent`` and never parses HTML, so outside text
(a model's, a tool's, a person's) is data by construction: nothing here has to escape it.
What this module does is bound it (each field cut to a size a browser shows at once, with
how much was left out; the trace page holds all of it), decide what the channel's verbosity
shows, and keep links to plain http(s) URLs (the page also checks). Payloads compare by
value, so the live message never sends the same state twice.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from adapters import words
from adapters.live import RunView, StepView, approval_words, final_mark, status_line
from adapters.recovery import INTERRUPTED
from core.pictures import pictures_of
from core.text import http_url, neutral_bidi
from core.trace import Trace, source_domain, summary_line

FIELD_CHARS = 4_000
"""A thought, an input or an answer part shown live; the trace page has the rest."""
OBSERVATION_CHARS = 1_500
ANSWER_CHARS = 40_000
STEPS_SHOWN = 30
"""The latest steps a message shows; earlier ones are counted."""
SOURCES_SHOWN = 20
URL_CHARS = 2_000


@dataclass(frozen=True, slots=True)
class WebPayload:
    """One state of one message, as the JSON text the page receives."""

    body: str
    final: bool = False

    @classmethod
    def of(cls, data: dict[str, Any]) -> WebPayload:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        return cls(text, final=bool(data.get("final")))

    def data(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.body)
        return loaded


def clean(text: str, limit: int) -> dict[str, Any]:
    """``{"text": …, "cut": n}``: at most ``limit`` characters, bidi controls made visible."""
    shown = neutral_bidi(text[:limit])
    return {"text": shown, "cut": max(0, len(text) - limit)}


def safe_link(url: str) -> str | None:
    """``url`` when the page may link it (``core.text.http_url``); None: shown as text."""
    return http_url(url, limit=URL_CHARS)


def _step(step: StepView) -> dict[str, Any]:
    return {
        "n": step.index,
        "call": step.call,
        "thought": clean(step.thought.strip(), FIELD_CHARS),
        "action": clean(step.action, 80)["text"] if step.action else None,
        "input": clean(step.action_input, FIELD_CHARS) if step.action_input is not None else None,
        "observation": (
            clean(step.observation.strip(), OBSERVATION_CHARS)
            if step.observation is not None
            else None
        ),
        "error": step.error,
        "approval": approval_words(step.approval) if step.approval is not None else None,
    }


def sources(urls: Sequence[str]) -> list[dict[str, Any]]:
    return [
        {"text": clean(u, 300)["text"], "href": safe_link(u), "host": source_domain(u)}
        for u in list(dict.fromkeys(urls))[:SOURCES_SHOWN]
    ]


class WebRenderer:
    """``adapters.live.Renderer`` for the web chat."""

    def __init__(
        self,
        run_id: str,
        *,
        clock: Callable[[], float],
        trace_link: Callable[[str], str | None] | None = None,
    ) -> None:
        self.run_id = run_id
        self._clock = clock
        self._trace_link = trace_link

    def _base(self, view: RunView, *, final: bool) -> dict[str, Any]:
        return {
            "type": "run",
            "run": self.run_id,
            "question": clean(view.question, FIELD_CHARS),
            "phase": view.phase,
            "final": final,
            "verbosity": view.verbosity,
        }

    def live(self, view: RunView) -> WebPayload:
        data = self._base(view, final=False)
        if view.verbosity == "answer":
            data["status"] = f"⏳ Working on it · {view.elapsed(self._clock()):.1f} s"
        else:
            data["status"] = status_line(view, self._clock())
        if view.verbosity == "full":
            shown = view.steps[-STEPS_SHOWN:]
            data["earlier_steps"] = len(view.steps) - len(shown)
            data["steps"] = [_step(s) for s in shown]
        if view.answer:
            data["answer"] = clean(view.answer, ANSWER_CHARS)
        pending = view.pending
        if pending is not None:  # shown at every verbosity: a person must decide
            data["pending"] = {
                "step": pending.step,
                "call": pending.call,
                "tool": clean(pending.name, 80)["text"],
                "input": clean(pending.input, FIELD_CHARS),
                "thought": clean(pending.thought, FIELD_CHARS),
                "remember": pending.remember,
                "json": pending.json_input,
            }
        return WebPayload.of(data)

    def final(self, view: RunView) -> WebPayload:
        return WebPayload.of(self._final(view, ANSWER_CHARS))

    def compact(self, view: RunView) -> WebPayload:
        return WebPayload.of(self._final(view, FIELD_CHARS))

    def _final(self, view: RunView, answer_chars: int) -> dict[str, Any]:
        data = self._base(view, final=True)
        trace = view.trace
        mark = final_mark(view.phase)
        if view.phase == "cancelled":
            stopped = words.stopped(
                view.stopped_by, view.steps_made, shown=lambda w: clean(w, 80)["text"]
            )
            data["outcome"] = f"⏹️ {stopped}"
        elif view.phase == "failed":
            data["outcome"] = "❌ " + clean(view.reason or "The run failed.", 600)["text"]
        elif view.phase == "best_effort":
            data["outcome"] = (
                "⚠️ Stopped before a final answer: the best answer from what was found."
            )
        if trace is not None and trace.status == "interrupted":  # its process died
            data["outcome"] = INTERRUPTED
            if trace.question:  # the run Retry asks again, once (``/api/retry``); its own
                data["retry"] = trace.id  # key, as a turn from the history has another
        if view.answer:
            data["answer"] = clean(view.answer, answer_chars)
        if view.verbosity == "full":
            data["steps"] = [_step(s) for s in view.steps[-STEPS_SHOWN:]]
            data["earlier_steps"] = max(0, len(view.steps) - STEPS_SHOWN)
        data["footer"] = f"{mark} " + (summary_line(trace) if trace else f"{view.elapsed():.1f} s")
        if view.memory_unavailable:
            data["footer"] += " · ⚠️ memory unavailable"
        if trace is not None:
            data["pictures"] = [  # checked by their bytes: the type is ours, never the tool's
                f"data:{p.mime_type};base64,{base64.b64encode(p.data).decode()}"
                for p in pictures_of(trace)
            ]
            data["sources"] = sources(trace.cited or trace.sources)
            link = self._trace_link(trace.id) if self._trace_link is not None else None
            data["trace_url"] = link
        return data

    def trace_posts(
        self, trace: Trace, *, whole_answer: bool = False, steps: bool = True
    ) -> list[WebPayload]:
        """Nothing: the whole trace is the trace page, linked from the final message."""
        del trace, whole_answer, steps
        return []

    def plain(self, text: str) -> WebPayload:
        return WebPayload.of(
            {
                "type": "run",
                "run": self.run_id,
                "final": True,
                "outcome": clean(text, 2_000)["text"],
            }
        )

    def earlier(self, question: str, answer: str) -> WebPayload:
        """An answer from the history whose trace is gone (expired): its words only."""
        return WebPayload.of(
            {
                "type": "run",
                "run": self.run_id,
                "question": clean(question, FIELD_CHARS),
                "phase": "answered",
                "final": True,
                "answer": clean(answer, ANSWER_CHARS),
                "footer": "earlier",
            }
        )
