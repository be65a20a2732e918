"""Block Kit rendering of a run: pure functions of ``RunView`` and ``Trace``, no I/O.

Every payload must be one Slack accepts, whatever the model, a tool or a web page wrote.
Slack's limits (the fake Slack in tests/fakes/slack_server.py cites a source for each): 50 blocks, 1..3000 characters per
section or context text, about 12,000 characters of block text in all (``msg_blocks_too_long``)
and 4,000 of notification ``text`` (``msg_too_long``). This module keeps well inside them: a
message carries at most ``MESSAGE_BUDGET`` characters of block text; a live message that
outgrows it keeps the latest steps and collapses the earlier ones into one line; an answer
too long for the root message goes on in the thread; a trace field too long for a readable
thread is cut, with a pointer to the stored trace.

An action waiting for a person shows its Thought, the tool and its input in a code block,
who may decide and when it is denied automatically, and an ``actions`` block of Approve,
Edit…, Deny and Allow in this conversation (``adapters.slack.approval`` says what each
button carries). A decided step says how, in ``ApprovalRecord.describe()``'s words with the
person a mention: in the live message, the step lines, the final message and the thread.

Text from outside is data: ``adapters.slack.blocks`` escapes and cuts it (what it cannot
form, and why no cut falls inside an entity, is said there); the thread's posts are
``adapters.slack.trace_thread``'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from adapters import words
from adapters.live import REFUSED_NOTE, Phase, RunView, StepView
from adapters.slack.approval import ApprovalRef
from adapters.slack.blocks import (
    ACTION_LIMIT,
    ANSWER_LIMIT,
    COMPACT_QUESTION,
    CURSOR,
    DECISION_LIMIT,
    FALLBACK_LIMIT,
    FOLD_CHARS,
    MAX_BLOCKS,
    MESSAGE_BUDGET,
    MIN_ROOM,
    NAME_LIMIT,
    PENDING_INPUT_LIMIT,
    QUESTION_LIMIT,
    REASON_LIMIT,
    SECTION_LIMIT,
    SOURCES_ROOM,
    STATUS_LIMIT,
    STEP_LINE_LIMIT,
    THOUGHT_LIMIT,
    Block,
    SlackMessage,
    answer_is_cut,
    answer_text,
    approval_buttons,
    block_size,
    code_block,
    code_span,
    context,
    countdown,
    decision_line,
    decision_mark,
    fit,
    fold,
    links,
    mention,
    prose,
    prose_tail,
    quote,
    record_of,
    section,
    stop_button,
)
from adapters.slack.markdown import escape
from adapters.slack.stream_render import feedback_block
from adapters.slack.trace_thread import trace_posts, with_page_link
from core.events import ApprovalRequested
from core.pricing import format_usd
from core.trace import Trace, steps_made

# ---- the live message ---------------------------------------------------------------------

_PHASE_EMOJI: dict[Phase, str] = {
    "starting": ":hourglass_flowing_sand:",
    "reading": ":paperclip:",
    "waiting": ":hourglass_flowing_sand:",
    "thinking": ":thinking_face:",
    "acting": ":hammer_and_wrench:",
    "approval": ":raised_hand:",
    "retrying": ":arrows_counterclockwise:",
    "answering": ":writing_hand:",
    "answered": ":white_check_mark:",
    "refused": ":no_entry_sign:",
    "unformatted": ":warning:",
    "best_effort": ":warning:",
    "failed": ":x:",
    "cancelled": ":black_square_for_stop:",
}


class SlackRenderer:
    """Implements ``adapters.live.Renderer[SlackMessage]`` for one run.

    ``run_id`` goes into the Stop button's value; without it (the placeholder posted before
    the run exists) there is no button. ``approvals``: the approval buttons work here (the bot
    has an ``ApprovalBroker``); ``approval_timeout``: how long a decision is waited for,
    named when none came. Who may decide is the view's ``approvers``.
    """

    def __init__(
        self,
        *,
        run_id: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        approvals: bool = True,
        approval_timeout: float | None = None,
        trace_link: Callable[[str], str | None] | None = None,
        quiet_asker: bool = False,
    ) -> None:
        self.run_id = run_id
        self.quiet_asker = quiet_asker
        """Name the asker in plain text, never as a mention (a scheduled run's owner: a
        mention in a post the bot makes on its own would notify them at every run)."""
        self._clock = clock
        self.approvals = approvals
        self.approval_timeout = approval_timeout
        self.trace_link = trace_link
        """The signed page of a trace (``bot.web.LinkSigner.link``): the thread's last post
        carries it."""

    # ---- Renderer protocol ----------------------------------------------------------------
    def live(self, view: RunView) -> SlackMessage:
        if view.is_final:
            return self.final(view)
        line = self._status_line(view)
        if view.verbosity == "answer" and view.pending is None:
            line = f":hourglass_flowing_sand: Working on it · {view.elapsed(self._clock()):.1f} s"
        status = section(line, accessory=self._button(view))
        head = [_question_block(view), status]
        room = _room(head, reserve=2 * MIN_ROOM)
        if view.pending is not None:
            tail = self._pending_blocks(view, view.pending, room)
        elif view.verbosity != "full":  # the status line is all a brief channel sees
            return SlackMessage(_fallback(view, _status_words(view)), tuple(head))
        else:
            tail = _current_step_blocks(view, room, timeout=self.approval_timeout)
        blocks = [*head, *_fit_step_lines(view, head, tail, self._done_steps(view)), *tail]
        return SlackMessage(_fallback(view, _status_words(view)), tuple(blocks))

    def final(self, view: RunView) -> SlackMessage:
        head = [_question_block(view)]
        body = _final_body(view)
        sources = links(_sources(view), SOURCES_ROOM) if view.phase == "answered" else ""
        if sources:
            body.append(context(f"Sources: {sources}"))
        if view.verbosity == "answer":  # the answer alone: no totals, no steps, no thread
            shown = (*head, *body, *self._votes(view))
            return SlackMessage(_fallback(view, _final_words(view)), shown)
        foot = [context(_totals_line(view, self._clock))]
        lines: list[Block] = []
        if view.phase in ("failed", "cancelled"):  # no answer: show how far it got
            lines = _fit_step_lines(view, head, [*body, *foot], [s for s in view.steps if s.done])
        else:  # the step lines are not shown: say how people decided, where it fits
            room = MESSAGE_BUDGET - sum(block_size(b) for b in (*head, *body, *foot))
            body += _decisions_block(view, room, timeout=self.approval_timeout)
        blocks = [*head, *lines, *body, *foot, *self._votes(view)]
        return SlackMessage(_fallback(view, _final_words(view)), tuple(blocks))

    def _votes(self, view: RunView) -> list[Block]:
        """👍 / 👎 under an answered run (``stream_render.feedback_block``)."""
        return [feedback_block(self.run_id)] if self.run_id and view.phase == "answered" else []

    def compact(self, view: RunView) -> SlackMessage:
        """The final state at its smallest: the question, the answer cut short (the thread
        has all of it) and the totals; no step lines, no sources, no Stop button."""
        blocks = [
            _question_block(view, limit=COMPACT_QUESTION),
            *_final_body(view, reason_limit=REASON_LIMIT // 2),
        ]
        if view.verbosity != "answer":
            blocks.append(context(_totals_line(view, self._clock)))
        return SlackMessage(_fallback(view, _final_words(view)), tuple(blocks))

    def trace_posts(
        self, trace: Trace, *, whole_answer: bool = False, steps: bool = True
    ) -> list[SlackMessage]:
        posts = trace_posts(
            trace,
            whole_answer=whole_answer,
            approval_timeout=self.approval_timeout,
            steps=steps,
            quiet_asker=self.quiet_asker,
        )
        link = self.trace_link(trace.id) if steps and self.trace_link is not None else None
        return with_page_link(posts, link) if link is not None else posts

    def plain(self, text: str) -> SlackMessage:
        body = answer_text(text.strip(), SECTION_LIMIT - 100) if text.strip() else "(no text)"
        return SlackMessage(
            text=prose(text.strip() or "(no text)", FALLBACK_LIMIT), blocks=(section(body),)
        )

    # ---- parts ----------------------------------------------------------------------------
    def _button(self, view: RunView) -> Block | None:
        return stop_button(self.run_id, view.asker) if self.run_id else None

    def _status_line(self, view: RunView) -> str:
        parts = [f"{_PHASE_EMOJI[view.phase]} {_step_label(view)}", _status_words(view)]
        now = self._clock()
        if view.pending is not None:  # the seconds stand still while a person decides,
            now = min(now, view.pending_since)  # so the message is not edited every tick
        parts.append(f"{view.elapsed(now):.1f} s")
        return " · ".join(p for p in parts if p)

    def _pending_blocks(self, view: RunView, pending: ApprovalRequested, room: int) -> list[Block]:
        """The action waiting for a person: its Thought, the tool and its input, who may
        decide and until when, and the buttons; the buttons and the line come first."""
        fixed = [context(self._pending_hint(view, pending))]
        if self.run_id and self.approvals:
            ref = ApprovalRef(self.run_id, pending.step, pending.call, view.asker or None)
            fixed.append(approval_buttons(ref, pending))
        room -= sum(block_size(b) for b in fixed)
        action = _pending_action(pending, min(PENDING_INPUT_LIMIT + 200, max(room, MIN_ROOM)))
        room -= block_size(action)
        thought: list[Block] = []
        if pending.thought.strip() and room >= MIN_ROOM:
            text = (
                f"*Thought:* {prose_tail(pending.thought.strip(), min(THOUGHT_LIMIT, room) - 14)}"
            )
            thought.append(context(text))
        return [*thought, action, *fixed]

    def _pending_hint(self, view: RunView, pending: ApprovalRequested) -> str:
        waited = max(0.0, self._clock() - view.pending_since)
        remaining = min(pending.timeout, max(0.0, pending.timeout - waited))
        decide = words.who_may_decide(view.approvers, mention(view.asker) if view.asker else None)
        if not (self.run_id and self.approvals):
            decide = "waiting for a decision"
        return f"{decide} · denied automatically {countdown(remaining)}"

    @staticmethod
    def _done_steps(view: RunView) -> list[StepView]:
        # The last step is shown in full while it is the newest, even when done.
        return [s for s in view.steps[:-1] if s.done]


def _room(blocks: Sequence[Block], *, budget: int = MESSAGE_BUDGET, reserve: int = 0) -> int:
    """What is left of ``budget`` beside ``blocks`` (and ``reserve``), never below MIN_ROOM."""
    return max(MIN_ROOM, budget - reserve - sum(block_size(b) for b in blocks))


def _step_label(view: RunView) -> str:
    current = view.current
    if current is None:
        return "starting"
    if current.final:
        return "final answer"
    return f"step {current.index}/{view.max_steps}" if view.max_steps else f"step {current.index}"


def _status_words(view: RunView) -> str:
    if view.pending is not None:  # says so over an earlier notice
        return "waiting for approval"
    status = view.status_text.strip()
    if status:
        return prose(status, STATUS_LIMIT)
    if view.phase in ("waiting", "retrying"):
        return "waiting"
    step = view.current
    if view.phase == "acting" and step is not None and step.action:
        label = words.acting(step.display, prose(step.action, NAME_LIMIT))[1]
        return label[:1].lower() + label[1:]
    return {"starting": "starting", "answering": "writing the answer"}.get(view.phase, "thinking")


def _question_block(view: RunView, *, limit: int = QUESTION_LIMIT) -> Block:
    asked = (view.heard or view.question).strip() or "(no question)"  # voice: "🎤 0:07 · …"
    if view.header:  # a scheduled run: its header names the owner, never as a mention
        return section(f"*{prose(view.header, limit)}*\n{prose(asked, limit)}")
    return section(f"*{mention(view.asker)} asked:* {prose(asked, limit)}")


def _current_step_blocks(view: RunView, room: int, *, timeout: float | None = None) -> list[Block]:
    """The newest step in full, within ``room``. The answer gets room first, then the
    action, how a person decided on it, the observation and the thought; a part that does
    not fit is left out."""
    step = view.current
    makers: dict[str, tuple[int, Callable[[int], Block]]] = {}
    if view.answer.strip():
        makers["answer"] = (ANSWER_LIMIT, lambda n: _live_answer(view.answer.strip(), n))
    if step is not None:
        if step.action:
            makers["action"] = (ACTION_LIMIT, lambda n: _live_action(step, n))
        if step.approval is not None:
            record = record_of(step.approval)
            makers["decision"] = (
                DECISION_LIMIT + 60,
                lambda n: context(decision_line(record, timeout=timeout, limit=n - 60)),
            )
        if step.observation is not None:
            makers["observation"] = (FOLD_CHARS + 100, lambda n: _live_observation(step, n))
        if step.thought.strip() or step.reasoning.strip():
            streaming = view.phase == "thinking" and not step.action
            makers["thought"] = (THOUGHT_LIMIT, lambda n: _live_thought(step, n, streaming))
    chosen: dict[str, Block] = {}
    for name in ("answer", "action", "decision", "observation", "thought"):
        if name not in makers or room < MIN_ROOM:
            continue
        cap, make = makers[name]
        block = make(min(cap, room))
        if block_size(block) <= room:
            chosen[name] = block
            room -= block_size(block)
    order = ("thought", "action", "decision", "observation", "answer")
    return [chosen[name] for name in order if name in chosen]


def _live_answer(answer: str, room: int) -> Block:
    return section(f"*Answer:* {answer_text(answer, room - 12)}{CURSOR}")


def _live_action(step: StepView, room: int) -> Block:
    call = f"{step.action}[{step.action_input or ''}]"
    return section(f"*Action:* {code_span(call, room - 12)}")


def _live_observation(step: StepView, room: int) -> Block:
    label = "*Observation (error):*" if step.error else "*Observation:*"
    return section(f"{label}\n{quote(fold(step.observation or '', limit=room - 100))}")


def _live_thought(step: StepView, room: int, streaming: bool) -> Block:
    if step.thought.strip():
        cursor = CURSOR if streaming else ""
        return context(f"*Thought:* {prose_tail(step.thought.strip(), room - 14)}{cursor}")
    return context(f"_Reasoning:_ {prose_tail(step.reasoning.strip(), room - 14)}")


def step_line(step: StepView) -> str:
    """One grey line per finished step: ``1 · search `Tokyo population` → 3 results``; a
    decided one says who decided how: ``2 · files_delete `…` ✅ approved by @ada → done``."""
    call = f"*{prose(step.action or '?', NAME_LIMIT)}* {code_span(step.action_input or '', 60)}"
    first = next(iter((step.observation or "")[:2000].strip().splitlines()), "")
    result = prose(first, 70) if first.strip() else "(empty)"
    arrow = "→ :warning:" if step.error else "→"
    mark = f" {decision_mark(record_of(step.approval))}" if step.approval is not None else ""
    return fit(f"{step.index} · {call}{mark} {arrow} {result}", STEP_LINE_LIMIT + len(mark))


def _pending_action(pending: ApprovalRequested, room: int) -> Block:
    name = f"*Action:* *{prose(pending.name, NAME_LIMIT)}*"
    if pending.call:
        name += f" (call {pending.call + 1} of this step)"
    text = pending.input
    if not text.strip():
        return section(f"{name}\n_(no input)_")
    limit = min(PENDING_INPUT_LIMIT, max(room, MIN_ROOM) - len(name) - 10)
    return section(f"{name}\n{code_block(prose(text, limit))}")


def _decisions_block(view: RunView, room: int, *, timeout: float | None) -> list[Block]:
    """One grey line saying how people decided on the run's actions, as many as fit in
    ``room`` (the rest are in the thread)."""
    decided = [s for s in view.steps if s.approval is not None]
    if not decided or room < MIN_ROOM:
        return []
    parts: list[str] = []
    used = len("Approvals: ") + 40  # room kept for "+N more"
    for step in decided:
        assert step.approval is not None
        line = decision_line(record_of(step.approval), timeout=timeout, limit=200)
        part = f"{step.index} · *{prose(step.action or '?', NAME_LIMIT)}* {line}"
        if used + len(part) + 3 > room:
            break
        parts.append(part)
        used += len(part) + 3
    if not parts:
        return []
    hidden = len(decided) - len(parts)
    more = f" · +{hidden} more in the thread" if hidden else ""
    return [context("Approvals: " + " · ".join(parts) + more)]


def _fit_step_lines(
    view: RunView, head: Sequence[Block], tail: Sequence[Block], done: Sequence[StepView]
) -> list[Block]:
    """The newest finished-step lines that fit beside ``head`` and ``tail``; older ones
    collapse into a single "N earlier steps" line (its room is kept aside)."""
    collapse_room = MIN_ROOM
    room = MESSAGE_BUDGET - collapse_room - sum(block_size(b) for b in (*head, *tail))
    slots = MAX_BLOCKS - len(head) - len(tail) - 1  # one block kept for the collapse line
    acted = [s for s in done if s.action]
    kept: list[Block] = []
    for step in reversed(acted):
        block = context(step_line(step))
        if len(kept) >= slots or block_size(block) > room:
            break
        kept.insert(0, block)
        room -= block_size(block)
    hidden = len(acted) - len(kept)
    if hidden > 0 and slots >= 0:
        word = "step" if hidden == 1 else "steps"
        kept.insert(0, context(f"… {hidden} earlier {word} (the full trace goes in the thread)"))
    return kept


def _fallback(view: RunView, words: str) -> str:
    """The notification text; ``words`` is already rendered."""
    question = prose(view.question.strip(), 120) if view.question.strip() else "(no question)"
    return fit(f"{question} — {words}", FALLBACK_LIMIT)


# ---- the final message --------------------------------------------------------------------


def _answer_blocks(view: RunView, lead: str) -> list[Block]:
    answer = view.answer.strip()
    if not answer:
        return [section(f"{lead}_(empty answer)_")]
    note = "\n_(continued in the thread ↓)_"
    text = answer_text(answer, ANSWER_LIMIT)
    if answer_is_cut(answer):
        text += note
    return [section(f"{lead}{text}")]


def _final_body(view: RunView, *, reason_limit: int = REASON_LIMIT) -> list[Block]:
    match view.phase:
        case "answered" | "refused":
            return _answer_blocks(view, "")
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
            reason = (
                prose(view.reason.strip(), reason_limit)
                if view.reason.strip()
                else "The run failed."
            )
            return [section(f":x: {reason} Nothing was lost; ask again.")]
        case "cancelled":
            return [section(f":black_square_for_stop: {_stopped_words(view)}")]
        case _:  # a live phase reaching final(): the stream ended early
            return [section(":x: The run ended without a result. Ask again.")]


def _stopped_words(view: RunView) -> str:
    return words.stopped(view.stopped_by, view.steps_made, shown=mention)


def _final_words(view: RunView) -> str:
    if view.phase == "failed":
        return prose(view.reason.strip(), 200) if view.reason.strip() else "failed"
    if view.phase == "cancelled":
        return "stopped"
    return prose(view.answer.strip(), 200) if view.answer.strip() else view.phase


def _sources(view: RunView) -> list[str]:
    trace = view.trace
    if trace is None:
        return []
    return list((trace.cited or trace.sources)[:3])


def _totals_line(view: RunView, clock: Callable[[], float]) -> str:
    trace = view.trace
    steps = steps_made(trace) if trace is not None else len(view.steps)
    seconds = trace.seconds if trace is not None and trace.ended_at else view.elapsed(clock())
    parts = [
        f"{_PHASE_EMOJI[view.phase]} {steps} step{'s' if steps != 1 else ''}",
        f"{seconds:.1f} s",
    ]
    if view.phase == "refused":
        parts.insert(1, REFUSED_NOTE)
    if view.tokens:
        parts.append(f"{view.tokens:,} tokens")
    if trace is not None and trace.cost_usd is not None:
        parts.append(format_usd(trace.cost_usd))
    if view.memory_unavailable:
        parts.append(":warning: memory unavailable")
    parts.append(f"{escape(trace.mode if trace is not None else view.mode)} mode")
    if trace is not None:
        parts += [prose(name, 60) for name in dict.fromkeys(trace.models) if name.strip()][:2]
        if trace.persona:
            parts.append("channel persona")
        parts.append("trace in thread ↓")
    return " · ".join(parts)
