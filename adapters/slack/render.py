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

Text from outside is data. It is mrkdwn-escaped (``&``, ``<``, ``>``), so it cannot form
``<!channel>``, ``<@U…>``, ``<#C…>`` or a masked ``<url|label>`` link: the only ``<…>`` in a
payload are the mentions this module writes for the asker and whoever pressed Stop, source
links labelled with their URL's host, and an answer's own links shown as their URL. Code
fences in model text are broken (a zero-width space between backticks) except in answers,
whose Markdown is converted to mrkdwn by ``adapters.slack.markdown`` (the same rules:
escaped, a link's URL always shown, code blocks kept), and an open code block is closed
wherever the text is cut. Outside text is cut before it is escaped, by the length it will
have once escaped, so no cut falls inside ``&amp;``; rendered text is cut only outside
entities and ``<…>`` links. Every width and room computed here is clamped to at
least ``MIN_ROOM``, so no loop can stall on a zero-sized piece.
"""

from __future__ import annotations

import math
import re
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from adapters import words
from adapters.answering import SHUTDOWN
from adapters.live import REFUSED_NOTE, Phase, RunView, StepView
from adapters.slack.approval import (
    ALWAYS_ACTION_ID,
    APPROVE_ACTION_ID,
    DENY_ACTION_ID,
    EDIT_ACTION_ID,
    ApprovalRef,
    editable,
)
from adapters.slack.markdown import escape, plain, plain_len, to_mrkdwn
from core.events import ApprovalDecided, ApprovalRequested
from core.pricing import format_usd
from core.trace import ApprovalRecord, Trace, TraceStep, source_domain, steps_made, summary_line

Block = dict[str, Any]

STOP_ACTION_ID = "reactbot_stop"

SECTION_LIMIT = 3000
MAX_BLOCKS = 50
MESSAGE_BUDGET = 4000
"""Characters of block text per message: readable, and a third of Slack's ~12,000-character
ceiling, whose per-block overhead is undocumented."""
FALLBACK_LIMIT = 300
MIN_ROOM = 80
QUESTION_LIMIT = 600
COMPACT_QUESTION = 200
STATUS_LIMIT = 200
NAME_LIMIT = 40
THOUGHT_LIMIT = 1200
ACTION_LIMIT = 300
STEP_LINE_LIMIT = 160
FOLD_LINES = 3
FOLD_CHARS = 400
ANSWER_LIMIT = 2000
"""The answer's room in the root message (live and final); a longer one goes on in the thread."""
REASON_LIMIT = 600
SOURCES_ROOM = 600
LINK_URL_LIMIT = 500
"""Longer source URLs are named by their host without a link: a link costs its whole URL."""
CHUNK = SECTION_LIMIT - 100
"""Room for one piece of a long text in the thread, beside its label and fences."""
ANSWER_PARTS = 30
"""The thread carries answers up to ~85,000 characters; longer ones are cut."""
CURSOR = "▍"
DECISION_LIMIT = 300
"""A decision line in the live or final message (the reason and edits cut); the thread's
may take ``DECISION_TRACE_LIMIT``."""
DECISION_TRACE_LIMIT = 800
PENDING_INPUT_LIMIT = 1200
"""The pending action's input in the live message (the Edit modal shows all of it)."""

_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
_SAFE_URL = re.compile(r"^https?://[^\s<>|]+$")
_HOST = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]{1,5})?$")
FENCE = "```"
_CLOSE = "\n```"


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


# ---- outside text into mrkdwn -------------------------------------------------------------


def _end_within(text: str, start: int, room: int) -> int:
    """The largest ``end`` such that ``text[start:end]`` rendered takes at most ``room``
    characters (at least one character, so callers always move on)."""
    low, high = start, min(len(text), start + max(room, 0))  # a character renders to >= 1
    while low < high:  # binary search: the rendered length grows with the end
        mid = (low + high + 1) // 2
        if plain_len(text[start:mid]) <= room:
            low = mid
        else:
            high = mid - 1
    return max(low, min(start + 1, len(text)))


def _start_within(text: str, room: int) -> int:
    """The smallest ``start`` such that ``text[start:]`` rendered (fences broken) takes at
    most ``room`` characters."""
    low, high = max(0, len(text) - max(room, 0)), len(text)
    while low < high:
        mid = (low + high) // 2
        if plain_len(text[mid:]) <= room:
            high = mid
        else:
            low = mid + 1
    return low


def prose(text: str, limit: int) -> str:
    """Outside text for a mrkdwn field: escaped, fences broken, at most ``limit`` characters
    (cut at the end with "…")."""
    limit = max(limit, MIN_ROOM)
    end = _end_within(text, 0, limit - 1)
    if end >= len(text):
        return plain(text)
    return plain(text[:end]).rstrip() + "…"


def prose_tail(text: str, limit: int) -> str:
    """Like ``prose`` but keeps the end: the text that just arrived."""
    limit = max(limit, MIN_ROOM)
    start = _start_within(text, limit - 1)
    if start == 0:
        return plain(text)
    return "…" + plain(text[start:]).lstrip()


def answer_text(text: str, limit: int) -> str:
    """An answer for a mrkdwn field: its Markdown as mrkdwn (``adapters.slack.markdown``:
    escaped, no masked links, code blocks kept), at most ``limit`` characters, cut where
    nothing breaks and an open code block closed."""
    return fit(to_mrkdwn(text), limit)


def _close_fence(mrkdwn: str) -> str:
    return mrkdwn + _CLOSE if mrkdwn.count(FENCE) % 2 else mrkdwn


def fit(mrkdwn: str, limit: int) -> str:
    """Rendered mrkdwn in at most ``limit`` characters, cut where nothing breaks (not inside
    an entity, a ``<…>`` link or mention, or a run of backticks) and with an open code block
    closed. The last line of defence: rendering normally leaves nothing for it to cut."""
    limit = max(limit, MIN_ROOM)
    if len(mrkdwn) <= limit and mrkdwn.count(FENCE) % 2 == 0:
        return mrkdwn
    if len(mrkdwn) + len(_CLOSE) <= limit:
        return _close_fence(mrkdwn)
    cut = _safe_cut(mrkdwn, limit - 1 - len(_CLOSE))
    return _close_fence(mrkdwn[:cut].rstrip() + "…")


def _safe_cut(text: str, at: int) -> int:
    at = max(0, min(at, len(text)))
    amp = text.rfind("&", max(0, at - 4), at)
    if amp >= 0 and ";" not in text[amp:at]:
        at = amp
    opened = text.rfind("<", 0, at)
    if opened > text.rfind(">", 0, at):
        at = opened
    while 0 < at < len(text) and text[at - 1] == "`" and text[at] == "`":
        at -= 1
    return at


def fold(text: str, *, lines: int = FOLD_LINES, limit: int = FOLD_CHARS) -> str:
    """The first few lines of an observation and how much was left out, rendered."""
    body = text.strip()
    kept = "\n".join(body[: limit * 2].splitlines()[:lines])
    shown = min(len(kept), _end_within(kept, 0, max(limit, MIN_ROOM) - 1))
    hidden = len(body) - shown
    return prose(kept, limit) + (f"\n(+{hidden:,} chars)" if hidden > 0 else "")


def quote(mrkdwn: str) -> str:
    return "\n".join(f"&gt; {line}" for line in mrkdwn.splitlines() or [""])


def code_span(text: str, limit: int) -> str:
    # A backtick inside would end the span, a newline would break it; Slack escapes neither.
    flat = text.replace("`", "'").replace("\n", " ")
    return "`" + (prose(flat, limit) if flat.strip() else " ") + "`"


def code_block(mrkdwn: str) -> str:
    """``mrkdwn`` (already rendered, fences broken) inside a code block."""
    return f"{FENCE}\n{mrkdwn}\n{FENCE}"


def mention(user: str | None) -> str:
    """A real mention for a Slack user id we put there ourselves; anything else is escaped."""
    if not user:
        return "someone"
    return f"<@{user}>" if _USER_ID.match(user) else prose(user, NAME_LIMIT)


def link(url: str) -> str:
    """A source: ``<url|host>`` for a plain http(s) URL, else its host (or the text) escaped."""
    if len(url) <= LINK_URL_LIMIT and _SAFE_URL.match(url):
        try:
            netloc = urllib.parse.urlsplit(url).netloc
        except ValueError:  # an unbalanced [ in the host part: not a plain URL
            netloc = ""
        if netloc and "@" not in netloc and _HOST.match(netloc):
            return f"<{escape(url)}|{escape(source_domain(url))}>"
    return prose(source_domain(url) or url or "?", NAME_LIMIT)


def links(urls: Sequence[str], room: int) -> str:
    """As many whole source links as fit in ``room`` characters, in order."""
    room = max(room, MIN_ROOM)
    kept: list[str] = []
    used = 0
    for url in urls:
        item = link(url)
        if used + len(item) + 2 <= room:
            kept.append(item)
            used += len(item) + 2
    return ", ".join(kept)


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
        "text": {"type": "mrkdwn", "text": fit(text, SECTION_LIMIT) if text.strip() else "…"},
    }
    if accessory is not None:
        block["accessory"] = accessory
    return block


def context(text: str) -> Block:
    body = fit(text, SECTION_LIMIT) if text.strip() else "…"
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": body}]}


RETRY_ACTION_ID = "reactbot_retry"


def retry_block(run_id: str) -> Block:
    """Under an answer a restart interrupted: asks its question again."""
    return {
        "type": "actions",
        "elements": [
            {
                "type": "button",
                "action_id": RETRY_ACTION_ID,
                "text": {"type": "plain_text", "text": "🔁 Retry", "emoji": True},
                "value": run_id,
            }
        ],
    }


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
    not know who asked) must still decide who may press it. Slack takes 2000 characters;
    an asker that long is no Slack user id, and the run's own replica knows who asked."""
    value = f"{run_id}:{asker}"
    return value if len(value) <= 2000 else run_id


def parse_stop_value(value: str) -> tuple[str, str | None]:
    """``(run_id, asker)``; the asker is None for a value holding only the run id."""
    run_id, _, asker = value.partition(":")
    return run_id, asker or None


# ---- approvals -----------------------------------------------------------------------------

_BY = "\x00by\x00"
"""Stands in for the person in ``describe()``'s words until they are escaped; then the first
one (``describe()`` names the person before any outside text) becomes the mention."""


def record_of(event: ApprovalDecided) -> ApprovalRecord:
    return ApprovalRecord(event.outcome, event.by, reason=event.reason, remembered=event.remembered)


def decision_line(
    record: ApprovalRecord, *, timeout: float | None = None, limit: int = DECISION_LIMIT
) -> str:
    """``✅ approved by <@U1ADA>``, ``🚫 denied by <@U1ADA>: "not that one"``: the record's
    ``describe()`` as mrkdwn, escaped and cut to ``limit`` characters (plus the mention);
    a timeout says how long was waited when ``timeout`` is known."""
    if record.outcome == "timeout" and timeout:
        return f"⌛ no decision in {duration(timeout)}: denied"
    marked = replace(record, by=_BY if record.by else None)
    line = prose(marked.describe(), limit)
    return line.replace(_BY, mention(record.by), 1) if record.by else line


def decision_mark(record: ApprovalRecord) -> str:
    """The short form for a step line: who decided how, without the reason or the edit."""
    if record.outcome == "timeout":
        return "⌛ no decision: denied"
    bare = replace(record, input=None, reason="", remembered=False)
    return decision_line(bare, limit=NAME_LIMIT + 40)


def duration(seconds: float) -> str:
    """``0.5 s``, ``45 s``, ``5 min``, ``24 h``."""
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{round(seconds, 1):g} s"
    if seconds < 7200:
        return f"{round(seconds / 60):g} min"
    return f"{round(seconds / 3600, 1):g} h"


def countdown(remaining: float) -> str:
    """When an undecided action is denied, coarse enough that the message changes at most
    once a minute until the last two minutes (then every 15 s): each change is an edit."""
    if remaining >= 7200:
        return f"in {math.ceil(remaining / 3600)} h"
    if remaining >= 120:
        return f"in {math.ceil(remaining / 60)} min"
    if remaining >= 15:
        return f"in {math.ceil(remaining / 15) * 15} s"
    return "in a few seconds"


def approval_button(label: str, action_id: str, value: str, *, style: str | None = None) -> Block:
    button: Block = {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": label, "emoji": True},
        "value": value,
    }
    if style is not None:
        button["style"] = style
    return button


def approval_buttons(ref: ApprovalRef, pending: ApprovalRequested) -> Block:
    """Approve, Edit… (when the input fits the modal's field), Deny, and Allow in this
    conversation (when the policy remembers), in one ``actions`` block."""
    value = ref.encode()
    buttons = [approval_button("Approve", APPROVE_ACTION_ID, value, style="primary")]
    if editable(pending.input):
        buttons.append(approval_button("Edit…", EDIT_ACTION_ID, value))
    buttons.append(approval_button("Deny", DENY_ACTION_ID, value, style="danger"))
    if pending.remember:
        buttons.append(approval_button("Allow in this conversation", ALWAYS_ACTION_ID, value))
    return {"type": "actions", "elements": buttons}


# ---- the live message ---------------------------------------------------------------------

_PHASE_EMOJI: dict[Phase, str] = {
    "starting": ":hourglass_flowing_sand:",
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

_TOOL_VERBS = {"search": "searching", "calculate": "calculating", "lookup": "looking it up"}


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
    ) -> None:
        self.run_id = run_id
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
            return SlackMessage(_fallback(view, _final_words(view)), (*head, *body))
        foot = [context(_totals_line(view, self._clock))]
        lines: list[Block] = []
        if view.phase in ("failed", "cancelled"):  # no answer: show how far it got
            lines = _fit_step_lines(view, head, [*body, *foot], [s for s in view.steps if s.done])
        else:  # the step lines are not shown: say how people decided, where it fits
            room = MESSAGE_BUDGET - sum(block_size(b) for b in (*head, *body, *foot))
            body += _decisions_block(view, room, timeout=self.approval_timeout)
        blocks = [*head, *lines, *body, *foot]
        return SlackMessage(_fallback(view, _final_words(view)), tuple(blocks))

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
            trace, whole_answer=whole_answer, approval_timeout=self.approval_timeout, steps=steps
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
    if view.phase == "acting" and view.current is not None and view.current.action:
        name = view.current.action.lower()
        return _TOOL_VERBS.get(name, f"running {prose(name, NAME_LIMIT)}")
    return {"starting": "starting", "answering": "writing the answer"}.get(view.phase, "thinking")


def _question_block(view: RunView, *, limit: int = QUESTION_LIMIT) -> Block:
    question = prose(view.question.strip(), limit) if view.question.strip() else "(no question)"
    return section(f"*{mention(view.asker)} asked:* {question}")


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


def answer_is_cut(answer: str) -> bool:
    """The root message could not show all of ``answer``: the thread carries it whole."""
    return len(to_mrkdwn(answer.strip())) > max(ANSWER_LIMIT, MIN_ROOM)


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
    # the steps the trace shows (an open step the model wrote nothing in is none of them)
    steps = steps_made(view.trace) if view.trace is not None else len(view.steps)
    after = f" after step {steps}" if steps else " before the first step"
    if view.stopped_by == SHUTDOWN:
        return f"Stopped{after}: reactbot was restarting. Ask again in a moment."
    if view.stopped_by:
        return f"Stopped by {mention(view.stopped_by)}{after}."
    return f"Stopped{after}."


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


# ---- the trace thread ---------------------------------------------------------------------

THOUGHT_PARTS = 2
REASONING_PARTS = 2
INPUT_PARTS = 1
OBSERVATION_PARTS = 2
RAW_PARTS = 1
"""Sections a long trace field may take in the thread; the rest is in the stored trace (and
the JSON file attached to the thread). Fifty steps of 100 KB each stay a thread people read."""


def trace_posts(
    trace: Trace,
    *,
    whole_answer: bool = False,
    approval_timeout: float | None = None,
    steps: bool = True,
) -> list[SlackMessage]:
    """The thread under the answer: question, the full answer when the root had to cut it
    (or, ``whole_answer``, showed only a compact or plain form), one post per step (split
    when long; a decided step says how, naming ``approval_timeout`` for a timeout), the
    totals. Without ``steps``, only that full answer (nothing when the root showed it)."""
    answer_posts: list[SlackMessage] = []
    if trace.answer and (whole_answer or answer_is_cut(trace.answer)):
        answer = to_mrkdwn(trace.answer.strip())
        blocks = _sections(
            "*Answer*", answer, trace.id, parts=ANSWER_PARTS, sep=":\n", rendered=True
        )
        answer_posts = _pack(blocks, "Answer (continued)")
    if not steps:
        return answer_posts
    asked = f"*Question* (asked by {mention(trace.user_id or trace.user)})"
    question = trace.question.strip() or "(no question)"
    posts = _pack(
        _sections(asked, question, trace.id, parts=2, sep=":\n"), f"Question: {trace.question}"
    )
    posts += answer_posts
    for step in trace.steps:
        posts += _pack(step_blocks(step, trace.id, timeout=approval_timeout), f"Step {step.index}")
    posts += _pack(_totals_blocks(trace), summary_line(trace))
    return posts


def with_page_link(posts: list[SlackMessage], link: str) -> list[SlackMessage]:
    """The trace page's link in a context block at the end of the last post (a post of its
    own when that one is full). ``<url>`` with no label: our own URL, shown whole."""
    block = context(f":page_facing_up: Full trace page: <{link}>")
    last = posts[-1] if posts else None
    if last is not None and len(last.blocks) < MAX_BLOCKS:
        size = sum(block_size(b) for b in last.blocks) + block_size(block)
        if size <= MESSAGE_BUDGET:
            return [*posts[:-1], SlackMessage(last.text, (*last.blocks, block))]
    return [*posts, SlackMessage("Full trace page", (block,))]


def step_blocks(
    step: TraceStep, trace_id: str = "", *, timeout: float | None = None
) -> list[Block]:
    blocks = [context(_step_header(step))]
    if step.reasoning.strip():
        blocks += _sections(
            "*Reasoning:*", step.reasoning, trace_id, parts=REASONING_PARTS, code=True
        )
    if step.thought.strip():
        blocks += _sections("*Thought:*", step.thought.strip(), trace_id, parts=THOUGHT_PARTS)
    if step.action:
        blocks.append(section(f"*Action:* *{prose(step.action, 80)}*"))
        blocks += _sections(
            "*Input:*", step.action_input or "", trace_id, parts=INPUT_PARTS, code=True
        )
    if step.approval is not None:
        line = decision_line(step.approval, timeout=timeout, limit=DECISION_TRACE_LIMIT)
        blocks.append(context(f"*Approval:* {line}"))
    if step.observation is not None:
        label = (
            "*Observation (error):*"
            if step.error and step.error == step.observation
            else "*Observation:*"
        )
        blocks += _sections(label, step.observation, trace_id, parts=OBSERVATION_PARTS, code=True)
    if step.error and step.error != step.observation:
        blocks.append(section(f":warning: *Error:* {prose(step.error, 2000)}"))
    if step.kind == "format_error" and step.raw:
        blocks += _sections("*Raw reply:*", step.raw, trace_id, parts=RAW_PARTS, code=True)
    if step.sources:
        blocks.append(context("Sources: " + links(step.sources[:10], 2000)))
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
    if step.cost_usd is not None:
        meta.append(format_usd(step.cost_usd))
    if step.model.strip():
        meta.append(prose(step.model, 80))
    return " · ".join(meta)


def _totals_blocks(trace: Trace) -> list[Block]:
    lines = [f"*Totals* ({prose(trace.status, NAME_LIMIT)}): {prose(summary_line(trace), 600)}"]
    if trace.reason and trace.reason.strip():
        lines.append(f"Reason: {prose(trace.reason, 500)}")
    if trace.stopped_by and trace.stopped_by != SHUTDOWN:
        lines.append(f"Stopped by {mention(trace.stopped_by)}")
    if trace.sources:
        lines.append("Sources: " + links(trace.sources[:10], 1500))
    lines.append(f"Trace id `{prose(trace.id, NAME_LIMIT)}`")
    return [context("\n".join(lines))]


def _sections(
    label: str,
    text: str,
    trace_id: str,
    *,
    parts: int,
    code: bool = False,
    rendered: bool = False,
    sep: str = " ",
) -> list[Block]:
    """``text`` in at most ``parts`` labelled sections (code blocks when ``code``; already
    mrkdwn, with its code blocks, when ``rendered``); what does not fit is counted and
    pointed to in the stored trace."""
    pieces, hidden = _chunks(text, CHUNK - len(label), parts=parts, rendered=rendered)
    blocks: list[Block] = []
    for i, piece in enumerate(pieces, 1):
        if code:
            body = code_block(plain(piece))
        else:
            body = _close_fence(piece) if rendered else plain(piece)
        part = f" (part {i}/{len(pieces)})" if len(pieces) > 1 else ""
        blocks.append(section(f"{label}{part}{chr(10) if code else sep}{body}"))
    if hidden:
        where = f" (`reactbot trace show {prose(trace_id, NAME_LIMIT)}`)" if trace_id else ""
        blocks.append(context(f"… {hidden:,} more characters are in the stored trace{where}."))
    return blocks


def _chunks(text: str, size: int, *, parts: int, rendered: bool) -> tuple[list[str], int]:
    """Up to ``parts`` pieces of ``text`` that each render within ``size`` characters (are
    that long, when ``rendered``: then cut only where nothing breaks), cut at a newline or a
    space when one is near; and how many characters were left over."""
    size = max(size, MIN_ROOM) - (2 * len(_CLOSE) if rendered else 0)  # a fence closed, reopened
    pieces: list[str] = []
    start, n = 0, len(text)
    while start < n and len(pieces) < max(parts, 1):
        end = min(n, start + size) if rendered else _end_within(text, start, size)
        if end < n:  # a newline near the end, else a space, else anywhere (one long word)
            half = start + (end - start) // 2
            newline = text.rfind("\n", half, end)
            space = text.rfind(" ", half, end)
            end = newline if newline > start else space + 1 if space > start else end
            if rendered:
                safe = _safe_cut(text, end)
                end = safe if safe > start else end
        pieces.append(text[start:end])
        start = end
        while start < n and text[start] == "\n":
            start += 1
    if rendered:
        pieces = _reopen_fences(pieces)
    return pieces or [""], n - start


def _reopen_fences(pieces: list[str]) -> list[str]:
    """A code block cut between two pieces is closed at the end of one and reopened at the
    start of the next."""
    out: list[str] = []
    inside = False
    for piece in pieces:
        text = f"{FENCE}\n{piece}" if inside else piece
        inside = text.count(FENCE) % 2 == 1
        out.append(text)
    return out


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
    text = prose(fallback.strip() or "…", FALLBACK_LIMIT)
    return [SlackMessage(text, tuple(p)) for p in posts if p]


# ---- shrinking after msg_too_long ---------------------------------------------------------


def shorten(message: SlackMessage, *, factor: float = 0.5) -> SlackMessage:
    """A smaller version of ``message`` for a retry after a refusal: every text cut to
    ``factor`` of its length and grey step lines dropped except the newest three."""
    blocks = list(message.blocks)
    contexts = [i for i, b in enumerate(blocks) if b.get("type") == "context"]
    drop = set(contexts[:-3]) if len(contexts) > 3 else set()
    kept = [_shrink_block(b, factor) for i, b in enumerate(blocks) if i not in drop]
    text = fit(message.text, max(40, int(len(message.text) * factor)))
    return SlackMessage(text, tuple(kept))


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
    return fit(text, max(MIN_ROOM, int(len(text) * factor)))
