"""The trace thread under a Slack answer: each step as posts that fit Slack's limits, from the stored
``Trace`` (pure, no I/O)."""

from __future__ import annotations

from collections.abc import Sequence

from adapters.slack.blocks import (
    _CLOSE,
    ANSWER_PARTS,
    CHUNK,
    DECISION_TRACE_LIMIT,
    FALLBACK_LIMIT,
    FENCE,
    MAX_BLOCKS,
    MESSAGE_BUDGET,
    MIN_ROOM,
    NAME_LIMIT,
    Block,
    SlackMessage,
    _close_fence,
    _end_within,
    _safe_cut,
    answer_is_cut,
    block_size,
    code_block,
    context,
    decision_line,
    fit,
    links,
    mention,
    prose,
    section,
)
from adapters.slack.markdown import plain, to_mrkdwn
from adapters.words import SHUTDOWN
from core.pricing import format_usd
from core.trace import Trace, TraceStep, summary_line

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
    quiet_asker: bool = False,
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
    asker = prose(trace.user, NAME_LIMIT) if quiet_asker else mention(trace.user_id or trace.user)
    asked = f"*Question* (asked by {asker})"
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
