"""Discord rendering: a pure function from a run's state to message payloads.

Plain message content (not embeds) is used for the live and the final message: ``-#``
subtext, bold labels and ``>`` quotes tell the four kinds of content apart, and content is
what people copy and search. Limits: 2000 characters per message, so the live view keeps the
latest steps and collapses earlier ones, and long text is split at line boundaries with code
blocks closed and reopened across the cut.

Every piece of model or tool text is mention-escaped here; the surface also sends with
``AllowedMentions.none()``, so nothing the model writes can ping anyone.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from urllib.parse import quote

from adapters import words
from adapters.discord.payload import (
    MAX_FILES,
    DiscordPayload,
    FileSpec,
    PendingButtons,
)
from adapters.live import (
    ANSWER_PHASES,
    REFUSED_NOTE,
    RunView,
    StepView,
    Verbosity,
    approval_words,
)
from adapters.live import status_line as live_status_line
from core.events import ApprovalRequested
from core.pictures import pictures_of
from core.pricing import format_usd
from core.text import neutral_bidi
from core.trace import Trace, TraceStep, one_line, source_domain, steps_made, summary_line

CONTENT_LIMIT = 2000
HEARD_LIMIT = 400
"""Characters of a voice question's transcript shown above its answer."""
COMPACT_LIMIT = 1000
"""The final message's size when Discord refused the full one."""
EMBED_DESCRIPTION_LIMIT = 4096
OBSERVATION_LINES = 3
LINE_WIDTH = 160
SUMMARY_WIDTH = 60
THREAD_NAME_LIMIT = 100
ANSWER_POSTS = 30
"""Thread posts an answer's overflow may take; the rest is attached (about 58,000 characters
shown; a model bounded by ``model.max_tokens`` writes far less)."""
THOUGHT_POST_LIMIT = 3500
THOUGHT_SHOWN = 1500
"""A longer thought shows its start in the thread and is attached whole."""
SOURCES_LIMIT = 600
"""Characters of the final message's Sources line, whatever the URLs."""
LINK_LIMIT = 400
"""Longer URLs are named in the Sources line, not linked (the full URL is in the trace)."""
FENCE = "```"
CURSOR = "▍"

_URL_UNSAFE = re.compile(r"[\s()<>\[\]\"'`\\|^{}\x00-\x1f\x7f]")
"""Characters percent-encoded in a link target, so a URL cannot end its markdown early."""
_MENTION = re.compile(r"@(everyone|here|[!&]?[0-9])")

# ---- text helpers -------------------------------------------------------------------------

MIN_PART = 64
"""``split_text`` never splits into parts smaller than this, whatever room a caller computed."""
OPENER_LIMIT = 19
"""A reopened code block's fence line: ``` and a short language name at most."""
_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.-]{1,16}")
_MASKED_LINK = re.compile(r"\](\s*)\(")


def sanitize(text: str) -> str:
    """Text from a model, a tool or a user, made inert for Discord markdown: @everyone,
    @here and <@id>/<@&id> cannot ping, and ``[text](url)`` cannot become a masked link
    (a zero-width space between ``]`` and ``(``; the URL itself stays visible)."""
    return neutral_bidi(_MASKED_LINK.sub("]\u200b\\1(", _MENTION.sub("@\u200b\\1", text)))


def inline_code(text: str, *, width: int = LINE_WIDTH) -> str:
    """One line in a code span that the text cannot close early."""
    flat = one_line(sanitize(text), width).replace("`", "ˋ")  # a backtick would end the span
    return f"`{flat}`" if flat else "` `"


def defuse_fences(text: str) -> str:
    """Text for inside a code block: a ``` in it would end the block early."""
    return text.replace(FENCE, "`\u200b``")


def balance_fences(text: str, *, cut_inside: bool = False) -> str:
    """Reopen a block the cut started inside of; close a block still open at the end."""
    if cut_inside:
        text = FENCE + "\n" + text
    if text.count(FENCE) % 2:
        text += "\n" + FENCE
    return text


def fit(text: str, limit: int = CONTENT_LIMIT) -> str:
    """At most ``limit`` characters with every code block closed: the last guard of every
    payload, whatever the parts before it computed."""
    if len(text) <= limit and text.count(FENCE) % 2 == 0:
        return text
    room = max(0, limit - len(FENCE) - 2)
    if len(text) > room:
        text = text[:room].rstrip("`") + "…"  # never end inside a fence marker
    return balance_fences(text)


def tail(text: str, budget: int) -> str:
    """The last ``budget`` characters (about), code blocks kept whole on both sides."""
    if len(text) <= budget:
        return balance_fences(text)
    cut = len(text) - max(0, budget - 12)
    newline = text.find("\n", cut)
    if newline != -1 and newline - cut < 80:
        cut = newline + 1
    while 0 < cut < len(text) and text[cut] == "`" and text[cut - 1] == "`":
        cut += 1  # not inside a run of backticks: a fence split in two counts as neither
    inside = text[:cut].count(FENCE) % 2 == 1
    return balance_fences("…" + text[cut:], cut_inside=inside)


def split_text(text: str, limit: int = CONTENT_LIMIT) -> list[str]:
    """Split into parts of at most ``limit`` (``MIN_PART`` at the least), at line boundaries
    where it can; a code block open at a cut is closed there and reopened in the next part.

    Every bound is derived from ``limit`` and clamped, so no room a caller computes can
    make a line width reach zero (which once looped forever on a long URL).
    """
    limit = max(limit, MIN_PART)
    closing = len(FENCE) + 1
    width = limit - closing - OPENER_LIMIT - 9  # a reopened fence, the line, the closing
    parts: list[str] = []
    current: list[str] = []
    size = 0
    opener: str | None = None  # the fence line to reopen the block we are in

    def flush() -> None:
        nonlocal current, size
        body = "\n".join(current) + ("\n" + FENCE if opener is not None else "")
        if body.strip():
            parts.append(body)
        current = [opener] if opener is not None else []
        size = len(opener) + 1 if opener is not None else 0

    for line in _hard_wrap(text.split("\n"), width):
        if current and size + len(line) + 1 > limit - closing:
            flush()
        current.append(line)
        size += len(line) + 1
        if line.count(FENCE) % 2:
            opener = None if opener is not None else _opener(line)
    if current:
        flush()
    return parts or [""]


def _opener(line: str) -> str:
    """The fence line that reopens the block ``line`` opened, keeping a short language."""
    after = line[line.rfind(FENCE) + len(FENCE) :].strip()
    language = after if _LANGUAGE.fullmatch(after) else ""
    return FENCE + language


def _hard_wrap(lines: Sequence[str], width: int) -> list[str]:
    width = max(1, width)
    out: list[str] = []
    for line in lines:
        out.extend(line[i : i + width] for i in range(0, max(1, len(line)), width))
    return out


def fold_quote(text: str, *, lines: int = OBSERVATION_LINES, width: int = LINE_WIDTH) -> str:
    """An observation as a quote of its first lines, saying how much was left out."""
    all_lines = [ln for ln in text.strip().splitlines() if ln.strip()] or ["(empty)"]
    shown = [one_line(ln, width) for ln in all_lines[:lines]]
    quoted = "\n".join("> " + _escape_quote(ln) for ln in shown)
    hidden = len(all_lines) - len(shown)
    if hidden > 0:
        quoted += f"\n> -# … {hidden} more line{'s' if hidden != 1 else ''} in the trace"
    return quoted


def _escape_quote(line: str) -> str:
    # Observations are data: markdown in them must not restyle the message.
    return re.sub(r"([\\*_~|`>#])", r"\\\1", line)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


# ---- the status line ----------------------------------------------------------------------


def status_line(view: RunView, now: float) -> str:
    """``🔎 Searching · step 2/8 · 3.4 s`` (``adapters.live.status_line``; a tool's name as
    inline code)."""
    return live_status_line(view, now, shown=lambda name: inline_code(name, width=40))


# ---- the live message ---------------------------------------------------------------------


def step_summary(step: StepView | TraceStep) -> str:
    """A finished step as one subtext line: number, action, input, a short result."""
    action = step.action or "reply"
    line = f"-# {step.index} · {sanitize(action)} {inline_code(step.action_input or '', width=50)}"
    observation = step.observation
    if observation is not None:
        first = next((ln for ln in observation.splitlines() if ln.strip()), "(empty)")
        mark = "⚠️ " if step.error else ""
        result = one_line(sanitize(first), SUMMARY_WIDTH).replace("`", "ˋ")
        line += f" → {mark}{result}"
    decided = step.approval if isinstance(step, StepView) else None
    if decided is not None:
        line += " · " + one_line(sanitize(approval_words(decided)), 120)
    return line


def approval_block(view: RunView, pending: ApprovalRequested, now: float, budget: int) -> str:
    """The action waiting for a person: the thought, the tool, its input in a code block,
    who may decide and when no decision becomes a denial."""
    language = "json" if pending.json_input else ""
    shown = pending.input if len(pending.input) <= 1200 else pending.input[:1199] + "…"
    pieces = [
        f"**Action** {inline_code(pending.name)}",
        f"{FENCE}{language}\n{defuse_fences(sanitize(shown))}\n{FENCE}",
        f"-# {words.who_may_decide(view.approvers, _mention(view.asker))} · denied automatically in "
        + countdown(pending.timeout - max(0.0, now - view.pending_since)),
    ]
    thought = pending.thought.strip()
    if thought:
        room = max(80, budget - sum(len(p) + 1 for p in pieces) - 20)
        pieces.insert(0, "**Thought** " + tail(sanitize(thought), room))
    return "\n".join(pieces)


def _mention(user: str) -> str | None:
    """A user id as a mention (the message is sent with no pings); None for anything else."""
    return f"<@{user}>" if user.isdigit() else None


def countdown(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


def current_step_block(view: RunView, step: StepView, budget: int) -> str:
    """The step being worked on: Thought growing, then Action, then folded Observation."""
    pieces: list[str] = []
    if step.action is not None:
        pieces.append(
            f"**Action** {inline_code(step.action)} {inline_code(step.action_input or '')}"
        )
    if step.observation is not None:
        pieces.append(fold_quote(sanitize(step.observation)))
    if view.phase == "answering" and view.answer:
        pieces.append("**Answer** " + tail(sanitize(view.answer), budget // 2) + CURSOR)
    fixed = sum(len(p) + 1 for p in pieces)
    thought = step.thought.strip()
    if thought:
        growing = step.action is None and view.phase != "answering"
        text = tail(sanitize(thought), max(80, budget - fixed - 20))
        pieces.insert(0, "**Thought** " + text + (CURSOR if growing else ""))
    elif step.reasoning.strip() and step.action is None:
        text = tail(sanitize(step.reasoning.strip()), max(80, min(400, budget - fixed - 20)))
        pieces.insert(0, "-# *reasoning…* " + one_line(text, 300))
    return "\n".join(pieces)


def collapse_steps(lines: list[str], budget: int) -> list[str]:
    """The latest step lines that fit; earlier ones fold into a single count line."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        if used + len(line) + 1 > budget - 40:
            hidden = len(lines) - len(kept)
            return [f"-# … {_plural(hidden, 'earlier step')}", *reversed(kept)]
        kept.append(line)
        used += len(line) + 1
    return list(reversed(kept))


def picture_files(view: RunView) -> tuple[FileSpec, ...]:
    """The pictures the run's tools returned (``core.pictures``), attached to its answer."""
    trace = view.trace
    return tuple(FileSpec(p.name, p.data) for p in pictures_of(trace)) if trace else ()


def heard_lines(view: RunView) -> list[str]:
    """First in its messages: a scheduled run's header and its question (no message of the
    asker's is above it), or a voice question's transcript, as a quote."""
    if view.header:
        said = [one_line(sanitize(view.header), HEARD_LIMIT)]
        return [*said, "> " + one_line(sanitize(view.question), HEARD_LIMIT)]
    return ["> " + one_line(sanitize(view.heard), HEARD_LIMIT)] if view.heard else []


def render_live(view: RunView, now: float, limit: int = CONTENT_LIMIT) -> str:
    """The live message: status, finished steps as subtext lines, the current step (with a
    channel's ``compact`` or ``answer`` verbosity, the status line alone, and the pending
    action when a person must decide)."""
    if view.verbosity != "full":
        return render_brief(view, now, limit)
    head = [*heard_lines(view), status_line(view, now)]
    if view.status_text and view.phase not in ("waiting", "retrying", "reading"):
        head.append("-# " + one_line(sanitize(view.status_text), 200))
    if view.memory_unavailable:
        head.append("-# ⚠️ memory unavailable: answering without this conversation's history")
    done = [s for s in view.steps if s.done]
    current = view.current if view.current is not None and not view.current.done else None
    budget = limit - sum(len(h) + 1 for h in head)
    if view.pending is not None:
        block = approval_block(view, view.pending, now, budget * 2 // 3)
    else:
        block = current_step_block(view, current, budget * 2 // 3) if current else ""
    budget -= len(block) + 1
    lines = collapse_steps([step_summary(s) for s in done], budget)
    return fit("\n".join([*head, *lines, *([block] if block else [])]), limit)


def render_brief(view: RunView, now: float, limit: int = CONTENT_LIMIT) -> str:
    """One status line (``answer`` verbosity: not even which step), and the pending action."""
    if view.verbosity == "answer" and view.pending is None:
        line = f"⏳ Working on it · {view.elapsed(now):.1f} s"
    else:
        line = status_line(view, now)
    line = "\n".join([*heard_lines(view), line])
    if view.pending is None:
        return fit(line, limit)
    block = approval_block(view, view.pending, now, limit - len(line) - 1)
    return fit(f"{line}\n{block}", limit)


# ---- the final message --------------------------------------------------------------------


def footer(trace: Trace | None, view: RunView, mark: str, *, thread: bool) -> str:
    """``-# ✅ 3 steps · 6.1 s · 1,240 tokens · text mode · `gpt-4o` · trace in thread ↓``
    (the model(s), and "channel persona" when one was in effect)."""
    steps = steps_made(trace) if trace is not None else len(view.steps)
    seconds = trace.seconds if trace is not None and trace.ended_at else view.elapsed()
    parts = [f"{mark} {_plural(steps, 'step')}", f"{seconds:.1f} s"]
    if view.phase == "refused":
        parts.insert(1, REFUSED_NOTE)
    tokens = trace.total_tokens if trace is not None else view.tokens
    if tokens:
        parts.append(_plural(tokens, "token"))
    if trace is not None and trace.cost_usd is not None:
        parts.append(format_usd(trace.cost_usd))
    if view.memory_unavailable:
        parts.append("⚠️ memory unavailable")
    parts.append(f"{trace.mode if trace is not None else view.mode} mode")
    if trace is not None:
        parts += model_parts(trace, lambda name: inline_code(name, width=60))
    if thread and trace is not None:
        parts.append("trace in thread ↓")
    return "-# " + " · ".join(parts)


def model_parts(trace: Trace, show: Callable[[str], str]) -> list[str]:
    """The footer's model(s), each through ``show`` (escaping), and the channel persona."""
    parts = [show(name) for name in dict.fromkeys(trace.models) if name.strip()][:2]
    if trace.persona:
        parts.append("channel persona")
    return parts


def sources_line(urls: Sequence[str], *, limit: int = SOURCES_LIMIT) -> str:
    """``Sources: [fifa.com](<https://…>), …``, at most ``limit`` characters: each link is
    named by its host; a URL too long to show is named, not linked, and what does not fit
    is counted. Every URL stays whole in the trace and its ``.json``."""
    web = [u for u in urls if u.startswith(("http://", "https://"))]
    items: list[str] = []
    used = len("Sources: ")
    for n, url in enumerate(web):
        item = _source_item(url)
        if used + len(item) + 2 > limit - 30:  # room left for the "+N more" item
            items.append(f"+{len(web) - n} more in the trace")
            break
        items.append(item)
        used += len(item) + 2
    return "Sources: " + ", ".join(items) if items else ""


def _source_item(url: str) -> str:
    name = source_domain(url)
    if not name:
        return "a link without a readable host (in the trace)"
    scheme, _, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    target = f"{scheme}://{host}{slash}" + _URL_UNSAFE.sub(
        lambda m: quote(m.group(), safe=""), path
    )
    if _URL_UNSAFE.search(host) or len(target) > LINK_LIMIT or len(name) > 60:
        return f"{one_line(name, 60)} (link too long to show; it is in the trace)"
    return f"[{name}](<{target}>)"


def final_body(view: RunView) -> tuple[str, str]:
    """The message text for a finished run, and the footer mark."""
    answer = sanitize(view.answer.strip()) or "(empty answer)"
    match view.phase:
        case "answered":
            return answer, "✅"
        case "refused":
            return answer, "🚫"
        case "unformatted":
            return (
                "⚠️ The model's reply did not follow the format; here it is unformatted:\n" + answer,
                "⚠️",
            )
        case "best_effort":
            head = f"⚠️ Stopped after {view.max_steps} steps without a final answer. "
            return head + "Best answer from what was found:\n" + answer, "⚠️"
        case "cancelled":
            stopped = words.stopped(view.stopped_by, view.steps_made, shown=sanitize)
            return f"⏹️ {stopped}", "⏹️"
        case _:
            reason = sanitize(view.reason or "The run failed.")
            return f"❌ {reason} Nothing was lost; ask again.", "❌"


def answer_parts(
    view: RunView,
    *,
    trace: Trace | None = None,
    limit: int = CONTENT_LIMIT,
    sources: bool = True,
) -> tuple[str, list[str]]:
    """The final message (answer, sources, footer) and the answer's overflow for the thread."""
    body, mark = final_body(view)
    trace = trace or view.trace
    cited = trace is not None and view.phase == "answered" and sources
    line = sources_line(trace.cited) if cited and trace is not None else ""
    foot = footer(trace, view, mark, thread=True) if view.verbosity != "answer" else ""
    tail_lines = [line for line in (line, foot) if line]
    heard = heard_lines(view)
    room = limit - sum(len(line) + 1 for line in heard + tail_lines) - 40
    parts = split_text(body, room)
    if len(parts) > 1:
        tail_lines.insert(0, "-# (the answer goes on in the thread ↓)")
    return "\n".join([*heard, parts[0], *tail_lines]), parts[1:]


def answer_overflow(trace: Trace, verbosity: Verbosity = "full") -> list[str]:
    """The part of a long answer that did not fit the final message (same split as there)."""
    if trace.status not in ANSWER_PHASES or not trace.answer:
        return []
    view = RunView(
        question=trace.question,
        answer=trace.answer,
        phase=trace.status,
        max_steps=max(0, trace.step_count - 1),  # best effort: the extra call is not a step
        verbosity=verbosity,
    )
    return answer_parts(view, trace=trace)[1]


def whole_answer_parts(trace: Trace) -> list[str]:
    """The entire answer for the thread, when the message showed only a compact form."""
    if not trace.answer:
        return []
    return split_text("**Answer** (in full)\n" + sanitize(trace.answer.strip()))


def thread_name(question: str) -> str:
    name = "Trace: " + one_line(question, THREAD_NAME_LIMIT) if question.strip() else "Trace"
    return name[: THREAD_NAME_LIMIT - 1] + "…" if len(name) > THREAD_NAME_LIMIT else name


# ---- the trace thread ---------------------------------------------------------------------


def step_posts(
    step: TraceStep, limit: int = CONTENT_LIMIT, *, subtext: bool = False
) -> list[DiscordPayload]:
    """One step of the trace: header, thought, action, observation (attached when long);
    with ``subtext``, the step's time and tokens on a ``-#`` line under its header."""
    head = f"**Step {step.index}**"
    if step.kind == "format_error":
        head += " (format error, re-asked)"
    elif step.kind == "final":
        head += " (final answer)"
    meta = [f"{step.seconds:.2f} s"]
    if step.tokens is not None:
        meta.append(_plural(step.tokens, "token"))
    lines = [f"{head}\n-# " + " · ".join(meta) if subtext else f"{head} · " + " · ".join(meta)]
    if step.reasoning.strip():
        lines.append("-# reasoning: " + one_line(sanitize(step.reasoning), 300))
    files: list[FileSpec] = []
    thought = step.thought.strip()
    if len(thought) > THOUGHT_POST_LIMIT:  # a thread people read, not tens of posts per step
        files.append(FileSpec(f"step-{step.index}-thought.md", thought.encode()))
        shown = tail(sanitize(thought[:THOUGHT_SHOWN]), THOUGHT_SHOWN)
        lines.append(
            f"**Thought** {shown}\n-# … the whole thought is attached ({len(thought):,} characters)"
        )
    elif thought:
        lines.append("**Thought** " + sanitize(thought))
    if step.action:
        lines.append(
            f"**Action** {inline_code(step.action)} {inline_code(step.action_input or '')}"
        )
    long_texts = [("observation", step.observation), ("raw reply", _raw_if_bad(step))]
    for label, text in long_texts:
        if text is None:
            continue
        block = f"**{label.capitalize()}**\n{FENCE}\n{defuse_fences(sanitize(text))}\n{FENCE}"
        if sum(len(x) + 1 for x in lines) + len(block) <= limit - 200:
            lines.append(block)
        else:
            slug = label.replace(" ", "-")
            files.append(FileSpec(f"step-{step.index}-{slug}.md", text.encode()))
            lines.append(f"**{label.capitalize()}** attached ({len(text):,} characters)")
    if step.approval is not None:
        lines.append("-# " + one_line(sanitize(step.approval.describe()), 400))
    if step.error and step.error != step.observation:
        lines.append("⚠️ " + one_line(sanitize(step.error), 400))
    parts = split_text("\n".join(lines), limit)
    posts = [DiscordPayload(p) for p in parts]
    posts[-1] = DiscordPayload(posts[-1].content, tuple(files))
    return posts


def _raw_if_bad(step: TraceStep) -> str | None:
    return step.raw if step.kind == "format_error" and step.raw else None


def totals_post(
    trace: Trace, *, sources: Callable[[Sequence[str]], str] | None = None
) -> DiscordPayload:
    """The run's totals and its ``.json``; ``sources`` writes the Sources line (by default
    ``sources_line``, the hosts as links)."""
    mark = {"answered": "✅", "cancelled": "⏹️", "failed": "❌"}.get(trace.status, "⚠️")
    lines = [
        f"**Totals** {mark} {trace.status.replace('_', ' ')} · {_plural(steps_made(trace), 'step')}"
        f" · {trace.seconds:.1f} s",
        f"-# {_tokens_text(trace)} · model: {', '.join(dict.fromkeys(trace.models))}",
    ]
    if trace.stopped_by:
        lines.append(f"Stopped by {one_line(sanitize(trace.stopped_by), 100)}")
    if trace.reason and not trace.stopped_by:
        lines.append("Reason: " + one_line(sanitize(trace.reason), 400))
    if trace.sources:
        lines.append("-# " + (sources or sources_line)(trace.sources))
    data = trace.to_json(indent=2).encode()
    return DiscordPayload("\n".join(lines), (FileSpec(f"trace-{trace.id}.json", data),))


def _tokens_text(trace: Trace) -> str:
    if not trace.total_tokens:
        return "tokens not reported by the model"
    return (
        f"{_plural(trace.total_tokens, 'token')} ({trace.prompt_tokens:,} prompt + "
        f"{trace.completion_tokens:,} completion)"
    )


def trace_posts(
    trace: Trace, overflow: Sequence[str] = (), *, steps: bool = True
) -> list[DiscordPayload]:
    """The thread: the rest of a long answer, the question, one post per step, the totals
    (without ``steps``: only the rest of the answer)."""
    posts = [DiscordPayload(part) for part in overflow[: ANSWER_POSTS - 1]]
    if len(overflow) >= ANSWER_POSTS:  # the rest as a file: a thread is read, not scrolled
        rest = "\n".join(overflow[ANSWER_POSTS - 1 :])
        note = f"-# … the answer goes on in the attached file ({len(rest):,} more characters)"
        posts.append(DiscordPayload(note, (FileSpec("answer-continued.md", rest.encode()),)))
    if not steps:
        return posts
    posts += question_posts(trace)
    for step in trace.steps:
        posts += step_posts(step)
    posts.append(totals_post(trace))
    return posts


def question_posts(trace: Trace) -> list[DiscordPayload]:
    """The question that opens the thread (attached whole when long), and who asked."""
    files: tuple[FileSpec, ...] = ()
    asked = trace.question
    if len(asked) > THOUGHT_POST_LIMIT:
        files = (FileSpec("question.md", asked.encode()),)
        asked = asked[:THOUGHT_SHOWN] + f"… (attached whole: {len(asked):,} characters)"
    question = "**Question** " + sanitize(asked)
    if trace.user:
        question += f"\n-# asked by {one_line(sanitize(trace.user), 100)}"
    asked_posts = [DiscordPayload(p) for p in split_text(question)]
    asked_posts[-1] = DiscordPayload(asked_posts[-1].content, files)
    return asked_posts


def pending_buttons(view: RunView) -> PendingButtons | None:
    """The decision buttons a pending approval needs (None: no approval waits)."""
    pending = view.pending
    if pending is None:
        return None
    return PendingButtons(pending.step, pending.call, pending.remember, pending.json_input)


def page_link_line(link: str) -> str:
    """The trace page's link as a post shows it: in ``<>``, our own URL, shown whole, with no
    embed under it."""
    return f"-# 📄 Full trace page: <{link}>"


TRACE_REPLY_LIMIT = 1500


def trace_reply_parts(trace: Trace, link: str | None) -> tuple[str, str, tuple[FileSpec, ...]]:
    """``/trace``'s reply: a subtext line of the run's numbers (and the trace page's link),
    the question and who asked, and the whole trace as ``.md`` and ``.json``."""
    numbers = f"-# {summary_line(trace)}"
    if link is not None:
        numbers += "\n" + page_link_line(link)
    files = (
        FileSpec(f"trace-{trace.id}.md", trace.to_markdown().encode()),
        FileSpec(f"trace-{trace.id}.json", trace.to_json(indent=2).encode()),
    )
    return numbers, question_posts(trace)[0].content, files


def with_page_link(posts: list[DiscordPayload], link: str) -> list[DiscordPayload]:
    """The trace page's link as the last line of the last post (a post of its own when that
    one is full)."""
    line = page_link_line(link)
    last = posts[-1] if posts else None
    # Not after a code block left open (a hostile reason's ```): it would show as code.
    fits = last is not None and len(last.content) + 1 + len(line) <= CONTENT_LIMIT
    if last is not None and fits and last.content.count(FENCE) % 2 == 0:
        return [*posts[:-1], DiscordPayload(f"{last.content}\n{line}", last.files)]
    return [*posts, DiscordPayload(line)]


# ---- the Renderer -------------------------------------------------------------------------


class DiscordRenderer:
    """``adapters.live.Renderer`` for Discord; ``clock`` is injectable for tests.

    Every payload leaves through ``fit``: whatever a part above computed, Discord gets at
    most 2,000 characters with its code blocks closed.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        trace_link: Callable[[str], str | None] | None = None,
    ) -> None:
        self._clock = clock
        self._trace_link = trace_link
        """The signed page of a trace (``bot.web.LinkSigner.link``): the thread's last post
        carries it."""

    def live(self, view: RunView) -> DiscordPayload:
        buttons = pending_buttons(view)
        return DiscordPayload(fit(render_live(view, self._clock())), approval=buttons)

    def final(self, view: RunView) -> DiscordPayload:
        content, _ = answer_parts(view)
        return DiscordPayload(
            fit(content),
            picture_files(view),
            stop_button="remove",
            thread_name=thread_name(view.question),
            votes=view.phase == "answered",
        )

    def compact(self, view: RunView) -> DiscordPayload:
        content, _ = answer_parts(view, limit=COMPACT_LIMIT, sources=False)
        return DiscordPayload(
            fit(content, COMPACT_LIMIT),
            picture_files(view),
            stop_button="remove",
            votes=view.phase == "answered",
        )

    def trace_posts(
        self, trace: Trace, *, whole_answer: bool = False, steps: bool = True
    ) -> list[DiscordPayload]:
        verbosity: Verbosity = "full" if steps else "answer"  # the footer the message had
        overflow = whole_answer_parts(trace) if whole_answer else answer_overflow(trace, verbosity)
        posts = trace_posts(trace, overflow, steps=steps)
        link = self._trace_link(trace.id) if steps and self._trace_link is not None else None
        if link is not None:
            posts = with_page_link(posts, link)
        return [DiscordPayload(fit(p.content), p.files[:MAX_FILES]) for p in posts]

    def trace_reply(self, trace: Trace) -> DiscordPayload:
        """The numbers first: a question's open code fence cannot swallow them."""
        link = self._trace_link(trace.id) if self._trace_link is not None else None
        numbers, question, files = trace_reply_parts(trace, link)
        return DiscordPayload(fit(f"{numbers}\n{question}", TRACE_REPLY_LIMIT), files)

    def plain(self, text: str) -> DiscordPayload:
        return DiscordPayload(fit(sanitize(text)), stop_button="remove")


def placeholder(question: str) -> DiscordPayload:
    del question  # the placeholder does not restate it: the user's message is right above
    return DiscordPayload("⏳ Starting…", stop_button="show")
