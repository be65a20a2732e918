"""Block Kit rendering of a run: pure functions of ``RunView`` and ``Trace``, no I/O.

Slack limits that shape everything here: 3000 characters per section text, 50 blocks per
message, and about 4000 characters in practice before ``msg_too_long``. A live message that
outgrows them keeps the latest steps and collapses the earlier ones into one line; an answer
too long for the root message goes on in the thread.

All model and tool text is mrkdwn-escaped (``&``, ``<``, ``>``) so it can never produce
``<!channel>``, ``<!here>`` or ``<@U…>`` pings; only mentions this module writes itself
(the asker, the person who pressed Stop) are real ones.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from adapters.live import Phase, RunView, StepView
from core.trace import Trace, TraceStep, source_domain, summary_line

Block = dict[str, Any]

STOP_ACTION_ID = "reactbot_stop"
SHUTDOWN = "reactbot:shutdown"
"""``Run.cancel(by=SHUTDOWN)``: the run was stopped because the bot is shutting down."""

SECTION_LIMIT = 3000
MAX_BLOCKS = 50
MESSAGE_BUDGET = 3800
"""Characters of block text per message; Slack's practical ceiling is about 4000."""
FALLBACK_LIMIT = 300
QUESTION_LIMIT = 600
THOUGHT_LIMIT = 1200
ACTION_LIMIT = 300
STEP_LINE_LIMIT = 160
FOLD_LINES = 3
FOLD_CHARS = 400
CURSOR = "▍"

_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
_SAFE_URL = re.compile(r"^https?://[^\s<>|]+$")


@dataclass(frozen=True, slots=True)
class SlackMessage:
    """A ``chat.postMessage``/``chat.update`` body: ``text`` is the notification fallback."""

    text: str
    blocks: tuple[Block, ...] = ()

    def kwargs(self) -> dict[str, Any]:
        return {"text": self.text, "blocks": list(self.blocks)}

    @property
    def size(self) -> int:
        return sum(block_size(b) for b in self.blocks)


# ---- text helpers -------------------------------------------------------------------------


def escape(text: str) -> str:
    """Slack's three control characters; after this, text cannot form a mention or link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def clip(text: str, limit: int, *, marker: str = "…") -> str:
    """At most ``limit`` characters, cut at the end."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(marker))].rstrip() + marker


def clip_head(text: str, limit: int) -> str:
    """At most ``limit`` characters, keeping the end (the text that just arrived)."""
    if len(text) <= limit:
        return text
    return "…" + text[len(text) - limit + 1 :].lstrip()


def fold(text: str, *, lines: int = FOLD_LINES, limit: int = FOLD_CHARS) -> str:
    """The first few lines of an observation and how much was left out."""
    kept = "\n".join(text.strip().splitlines()[:lines])
    kept = clip(kept, limit)
    hidden = len(text.strip()) - len(kept)
    return kept + (f"\n(+{hidden:,} chars)" if hidden > 0 else "")


def quote(text: str) -> str:
    return "\n".join(f"&gt; {line}" for line in text.splitlines() or [""])


def inline_code(text: str) -> str:
    # A backtick inside would end the code span; Slack has no escape for it.
    return "`" + (text.replace("`", "'") or " ") + "`"


def code_block(text: str) -> str:
    # Slack cannot escape ``` inside a code block; a zero-width space breaks the fence.
    return "```\n" + text.replace("```", "`\u200b``") + "\n```"


def mention(user: str | None) -> str:
    """A real mention for a Slack user id we put there ourselves; anything else is escaped."""
    if not user:
        return "someone"
    return f"<@{user}>" if _USER_ID.match(user) else escape(user)


def link(url: str) -> str:
    return f"<{url}|{escape(source_domain(url))}>" if _SAFE_URL.match(url) else escape(url)


def block_size(block: Block) -> int:
    """Characters of visible text in a block (what counts against the message budget)."""
    size = 0
    text = block.get("text")
    if isinstance(text, dict):
        size += len(text.get("text", ""))
    for element in block.get("elements", ()):
        if isinstance(element, dict) and isinstance(element.get("text"), str):
            size += len(element["text"])
    return size


# ---- blocks -------------------------------------------------------------------------------


def section(text: str, *, accessory: Block | None = None) -> Block:
    block: Block = {
        "type": "section",
        "text": {"type": "mrkdwn", "text": clip(text, SECTION_LIMIT)},
    }
    if accessory is not None:
        block["accessory"] = accessory
    return block


def context(text: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": clip(text, SECTION_LIMIT)}]}


def stop_button(run_id: str, asker: str) -> Block:
    return {
        "type": "button",
        "action_id": STOP_ACTION_ID,
        "text": {"type": "plain_text", "text": "Stop", "emoji": True},
        "style": "danger",
        "value": stop_value(run_id, asker),
    }


def stop_value(run_id: str, asker: str) -> str:
    """The button carries the asker too: a replica that does not run this run (and so does
    not know who asked) must still decide who may press it."""
    return f"{run_id}:{asker}"


def parse_stop_value(value: str) -> tuple[str, str | None]:
    """``(run_id, asker)``; the asker is None for a value holding only the run id."""
    run_id, _, asker = value.partition(":")
    return run_id, asker or None


# ---- the live message ---------------------------------------------------------------------

_PHASE_EMOJI: dict[Phase, str] = {
    "starting": ":hourglass_flowing_sand:",
    "waiting": ":hourglass_flowing_sand:",
    "thinking": ":thinking_face:",
    "acting": ":hammer_and_wrench:",
    "retrying": ":arrows_counterclockwise:",
    "answering": ":writing_hand:",
    "answered": ":white_check_mark:",
    "unformatted": ":warning:",
    "best_effort": ":warning:",
    "failed": ":x:",
    "cancelled": ":black_square_for_stop:",
}

_TOOL_VERBS = {"search": "searching", "calculate": "calculating", "lookup": "looking it up"}


class SlackRenderer:
    """Implements ``adapters.live.Renderer[SlackMessage]`` for one run.

    ``run_id`` goes into the Stop button's value; without it (the placeholder posted before
    the run exists) there is no button.
    """

    def __init__(
        self, *, run_id: str | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.run_id = run_id
        self._clock = clock

    # ---- Renderer protocol ----------------------------------------------------------------
    def live(self, view: RunView) -> SlackMessage:
        if view.is_final:
            return self.final(view)
        status = section(self._status_line(view), accessory=self._button(view))
        head = [_question_block(view), status]
        tail = _current_step_blocks(view)
        blocks = [*head, *_fit_step_lines(view, head, tail, self._done_steps(view)), *tail]
        return SlackMessage(_fallback(view, _status_words(view)), tuple(blocks))

    def final(self, view: RunView) -> SlackMessage:
        head = [_question_block(view)]
        body = _final_body(view)
        foot = [context(_totals_line(view, self._clock))]
        lines: list[Block] = []
        if view.phase in ("failed", "cancelled"):  # no answer: show how far it got
            lines = _fit_step_lines(view, head, [*body, *foot], [s for s in view.steps if s.done])
        blocks = [*head, *lines, *body, *foot]
        return SlackMessage(_fallback(view, _final_words(view)), tuple(blocks))

    def compact(self, view: RunView) -> SlackMessage:
        """No step lines, no sources, the answer cut short (the thread has all of it)."""
        body = _final_body(view)[:1]
        body = [_shrink_block(b, 0.5) for b in body]
        blocks = [_question_block(view), *body, context(_totals_line(view, self._clock))]
        return SlackMessage(_fallback(view, _final_words(view)), tuple(blocks))

    def trace_posts(self, trace: Trace, *, whole_answer: bool = False) -> list[SlackMessage]:
        return trace_posts(trace, whole_answer=whole_answer)

    def plain(self, text: str) -> SlackMessage:
        body = clip(escape(text), SECTION_LIMIT)
        return SlackMessage(text=clip(body, 300), blocks=(section(body),))

    # ---- parts ----------------------------------------------------------------------------
    def _button(self, view: RunView) -> Block | None:
        return stop_button(self.run_id, view.asker) if self.run_id else None

    def _status_line(self, view: RunView) -> str:
        parts = [f"{_PHASE_EMOJI[view.phase]} {_step_label(view)}", _status_words(view)]
        parts.append(f"{view.elapsed(self._clock()):.1f} s")
        return " · ".join(p for p in parts if p)

    @staticmethod
    def _done_steps(view: RunView) -> list[StepView]:
        # The last step is shown in full while it is the newest, even when done.
        return [s for s in view.steps[:-1] if s.done]


def _step_label(view: RunView) -> str:
    current = view.current
    if current is None:
        return "starting"
    if current.final:
        return "final answer"
    return f"step {current.index}/{view.max_steps}" if view.max_steps else f"step {current.index}"


def _status_words(view: RunView) -> str:
    if view.phase in ("waiting", "retrying") or view.status_text:
        return escape(view.status_text) or "waiting"
    if view.phase == "acting" and view.current is not None and view.current.action:
        name = view.current.action.lower()
        return _TOOL_VERBS.get(name, f"running {escape(clip(name, 40))}")
    return {"starting": "starting", "answering": "writing the answer"}.get(view.phase, "thinking")


def _question_block(view: RunView) -> Block:
    question = escape(clip(view.question.strip(), QUESTION_LIMIT)) or "(no question)"
    return section(f"*{mention(view.asker)} asked:* {question}")


def _current_step_blocks(view: RunView) -> list[Block]:
    step = view.current
    blocks: list[Block] = []
    if step is not None:
        streaming = view.phase == "thinking" and not step.action
        if step.reasoning and not step.thought:
            blocks.append(
                context(f"_Reasoning:_ {escape(clip_head(step.reasoning, THOUGHT_LIMIT))}")
            )
        if step.thought:
            thought = escape(clip_head(step.thought.strip(), THOUGHT_LIMIT))
            blocks.append(context(f"*Thought:* {thought}{CURSOR if streaming else ''}"))
        if step.action:
            call = f"{step.action}[{step.action_input or ''}]"
            blocks.append(section(f"*Action:* {inline_code(escape(clip(call, ACTION_LIMIT)))}"))
        if step.observation is not None:
            label = "*Observation (error):*" if step.error else "*Observation:*"
            blocks.append(section(f"{label}\n{quote(escape(fold(step.observation)))}"))
    if view.answer:
        answer = escape(clip(view.answer.strip(), 2000))
        blocks.append(section(f"*Answer:* {answer}{CURSOR}"))
    return blocks


def step_line(step: StepView) -> str:
    """One grey line per finished step: ``1 · search `Tokyo population` → 3 results``."""
    call = f"*{escape(clip(step.action or '?', 40))}* {inline_code(escape(clip(step.action_input or '', 60)))}"
    first = (step.observation or "").strip().splitlines()
    result = escape(clip(first[0], 70)) if first else "(empty)"
    arrow = "→ :warning:" if step.error else "→"
    return clip(f"{step.index} · {call} {arrow} {result}", STEP_LINE_LIMIT)


def _fit_step_lines(
    view: RunView, head: Sequence[Block], tail: Sequence[Block], done: Sequence[StepView]
) -> list[Block]:
    """The newest finished-step lines that fit beside ``head`` and ``tail``; older ones
    collapse into a single "N earlier steps" line."""
    room = MESSAGE_BUDGET - sum(block_size(b) for b in (*head, *tail))
    slots = MAX_BLOCKS - len(head) - len(tail) - 1  # one block kept for the collapse line
    kept: list[Block] = []
    for step in reversed([s for s in done if s.action]):
        block = context(step_line(step))
        if len(kept) >= slots or block_size(block) > room - 80:
            break
        kept.insert(0, block)
        room -= block_size(block)
    hidden = len([s for s in done if s.action]) - len(kept)
    if hidden > 0:
        word = "step" if hidden == 1 else "steps"
        kept.insert(0, context(f"… {hidden} earlier {word} (the full trace goes in the thread)"))
    return kept


def _fallback(view: RunView, words: str) -> str:
    """The notification text; ``words`` is already mrkdwn-safe."""
    question = clip(view.question.strip(), 120)
    return clip(escape(f"{question} — ") + words, FALLBACK_LIMIT)


# ---- the final message --------------------------------------------------------------------


def answer_room(view: RunView) -> int:
    """How much of the answer fits in the root message; the rest goes on in the thread."""
    question = block_size(_question_block(view))
    return min(SECTION_LIMIT - 200, MESSAGE_BUDGET - question - 600)


def answer_is_cut(answer: str, view: RunView | None = None) -> bool:
    room = answer_room(view) if view is not None else SECTION_LIMIT - 200
    return len(escape(answer.strip())) > room


def _answer_blocks(view: RunView, lead: str) -> list[Block]:
    text = escape(view.answer.strip()) or "_(empty answer)_"
    room = answer_room(view)
    if len(text) > room:
        text = clip(text, room - 40) + "\n_(continued in the thread ↓)_"
    return [section(f"{lead}{text}")]


def _final_body(view: RunView) -> list[Block]:
    match view.phase:
        case "answered":
            blocks = _answer_blocks(view, "")
            sources = _sources(view)
            if sources:
                blocks.append(context("Sources: " + ", ".join(link(u) for u in sources)))
            return blocks
        case "best_effort":
            steps = view.max_steps or len(view.steps)
            lead = (
                f":warning: *Stopped after {steps} steps without a final answer.* "
                "Best answer from what was found:\n"
            )
            return _answer_blocks(view, lead)
        case "unformatted":
            lead = (
                ":warning: *The model's reply did not follow the format;* here it is unformatted:\n"
            )
            return _answer_blocks(view, lead)
        case "failed":
            reason = escape(clip(view.reason or "The run failed.", 600))
            return [section(f":x: {reason} Nothing was lost; ask again.")]
        case "cancelled":
            return [section(f":black_square_for_stop: {_stopped_words(view)}")]
        case _:  # a live phase reaching final(): the stream ended early
            return [section(":x: The run ended without a result. Ask again.")]


def _stopped_words(view: RunView) -> str:
    after = f" after step {len(view.steps)}" if view.steps else " before the first step"
    if view.stopped_by == SHUTDOWN:
        return f"Stopped{after}: reactbot was restarting. Ask again in a moment."
    if view.stopped_by:
        return f"Stopped by {mention(view.stopped_by)}{after}."
    return f"Stopped{after}."


def _final_words(view: RunView) -> str:
    if view.phase == "failed":
        return escape(clip(view.reason, 200))
    if view.phase == "cancelled":
        return "stopped"
    return escape(clip(view.answer.strip(), 200)) or view.phase


def _sources(view: RunView) -> list[str]:
    trace = view.trace
    if trace is None:
        return []
    return list(trace.cited or trace.sources[:3])


def _totals_line(view: RunView, clock: Callable[[], float]) -> str:
    trace = view.trace
    steps = trace.step_count if trace is not None else len(view.steps)
    seconds = trace.seconds if trace is not None and trace.ended_at else view.elapsed(clock())
    parts = [
        f"{_PHASE_EMOJI[view.phase]} {steps} step{'s' if steps != 1 else ''}",
        f"{seconds:.1f} s",
    ]
    if view.tokens:
        parts.append(f"{view.tokens:,} tokens")
    if view.memory_unavailable:
        parts.append(":warning: memory unavailable")
    if trace is not None:
        parts.append("trace in thread ↓")
    return " · ".join(parts)


# ---- the trace thread ---------------------------------------------------------------------

CODE_CHUNK = SECTION_LIMIT - 20
"""Room for a code block's text once its fences are added."""


def trace_posts(trace: Trace, *, whole_answer: bool = False) -> list[SlackMessage]:
    """The thread under the answer: question, full answer when the root had to cut it,
    one post per step (split when long), the totals."""
    posts = [
        _pack(
            [section(f"*Question* (asked by {mention(trace.user)}):\n{escape(trace.question)}")],
            f"Question: {trace.question}",
        )[0]
    ]
    if trace.answer and (whole_answer or answer_is_cut(trace.answer)):
        blocks = [
            section(f"*Answer* ({_part(i, n)}):\n{chunk}")
            for i, n, chunk in _chunks(escape(trace.answer.strip()), SECTION_LIMIT - 40)
        ]
        posts += _pack(blocks, "Answer (continued)")
    for step in trace.steps:
        posts += _pack(step_blocks(step), f"Step {step.index}")
    posts += _pack(_totals_blocks(trace), summary_line(trace))
    return posts


def step_blocks(step: TraceStep) -> list[Block]:
    blocks = [context(_step_header(step))]
    if step.reasoning:
        blocks += _code_sections("*Reasoning:*", step.reasoning)
    if step.thought:
        blocks += [
            section(f"*Thought:* {chunk}")
            for _, _, chunk in _chunks(escape(step.thought.strip()), SECTION_LIMIT - 20)
        ]
    if step.action:
        blocks.append(section(f"*Action:* *{escape(clip(step.action, 80))}*"))
        blocks += _code_sections("*Input:*", step.action_input or "")
    if step.observation is not None:
        label = (
            "*Observation (error):*"
            if step.error and step.error == step.observation
            else "*Observation:*"
        )
        blocks += _code_sections(label, step.observation)
    if step.error and step.error != step.observation:
        blocks.append(section(f":warning: *Error:* {escape(clip(step.error, 2000))}"))
    if step.kind == "format_error" and step.raw:
        blocks += _code_sections("*Raw reply:*", step.raw)
    if step.sources:
        blocks.append(context("Sources: " + ", ".join(link(u) for u in step.sources[:10])))
    return blocks


def _step_header(step: TraceStep) -> str:
    head = f"*Step {step.index}*"
    if step.kind == "format_error":
        head += " (format error, re-asked)"
    elif step.kind == "final":
        head += " (final answer)"
    meta = [head, f"{step.seconds:.2f} s"]
    if step.tokens is not None:
        meta.append(f"{step.tokens:,} tokens")
    if step.model:
        meta.append(escape(step.model))
    return " · ".join(meta)


def _totals_blocks(trace: Trace) -> list[Block]:
    lines = [f"*Totals* ({escape(trace.status)}): {escape(summary_line(trace))}"]
    if trace.reason:
        lines.append(f"Reason: {escape(clip(trace.reason, 500))}")
    if trace.stopped_by and trace.stopped_by != SHUTDOWN:
        lines.append(f"Stopped by {mention(trace.stopped_by)}")
    if trace.sources:
        lines.append("Sources: " + ", ".join(link(u) for u in trace.sources[:10]))
    lines.append(f"Trace id `{escape(trace.id)}`")
    return [context("\n".join(lines))]


def _code_sections(label: str, text: str) -> list[Block]:
    chunks = list(_chunks(escape(text), CODE_CHUNK - len(label) - 20))
    if len(chunks) == 1:
        return [section(f"{label}\n{code_block(chunks[0][2])}")]
    return [section(f"{label} ({_part(i, n)})\n{code_block(c)}") for i, n, c in chunks]


def _chunks(text: str, size: int) -> Iterable[tuple[int, int, str]]:
    """``(part, parts, text)`` pieces of at most ``size``, cut at a newline when one is near."""
    pieces: list[str] = []
    rest = text
    while len(rest) > size:
        cut = rest.rfind("\n", size // 2, size)
        cut = cut if cut > 0 else size
        pieces.append(rest[:cut])
        rest = rest[cut:].lstrip("\n")
    pieces.append(rest)
    return [(i + 1, len(pieces), p) for i, p in enumerate(pieces)]


def _part(i: int, n: int) -> str:
    return f"part {i}/{n}" if n > 1 else "full"


def _pack(blocks: Sequence[Block], fallback: str) -> list[SlackMessage]:
    """Blocks into as few posts as the per-message limits allow, in order."""
    posts: list[list[Block]] = [[]]
    used = 0
    for block in blocks:
        size = block_size(block)
        if posts[-1] and (used + size > MESSAGE_BUDGET or len(posts[-1]) >= MAX_BLOCKS):
            posts.append([])
            used = 0
        posts[-1].append(block)
        used += size
    text = escape(clip(fallback, FALLBACK_LIMIT))
    return [SlackMessage(text, tuple(p)) for p in posts]


# ---- shrinking after msg_too_long ---------------------------------------------------------


def shorten(message: SlackMessage, *, factor: float = 0.5) -> SlackMessage:
    """A smaller version of ``message`` for a retry after ``msg_too_long``: every text cut
    to ``factor`` of its length and grey step lines dropped except the newest two."""
    blocks = list(message.blocks)
    contexts = [i for i, b in enumerate(blocks) if b.get("type") == "context"]
    drop = set(contexts[:-3]) if len(contexts) > 3 else set()
    kept = [_shrink_block(b, factor) for i, b in enumerate(blocks) if i not in drop]
    return SlackMessage(clip(message.text, max(40, int(len(message.text) * factor))), tuple(kept))


def _shrink_block(block: Block, factor: float) -> Block:
    out = dict(block)
    text = block.get("text")
    if isinstance(text, dict) and text.get("type") == "mrkdwn":
        out["text"] = {**text, "text": _cut_mrkdwn(text["text"], factor)}
    if block.get("type") == "context":
        out["elements"] = [
            {**e, "text": _cut_mrkdwn(e["text"], factor)} if isinstance(e.get("text"), str) else e
            for e in block.get("elements", ())
        ]
    return out


def _cut_mrkdwn(text: str, factor: float) -> str:
    limit = max(80, int(len(text) * factor))
    if len(text) <= limit:
        return text
    cut = clip(text, limit)
    # An escaped entity cut in half (``&am…``) would show as garbage; drop the stub.
    cut = re.sub(r"&[a-z]{0,3}…$", "…", cut)
    return cut + ("\n```" if cut.count("```") % 2 else "")
