"""Discord's Components V2 layout: a pure function from a run's state to cards.

A card is what one message holds in the ``components`` layout (``discord.layout``): one
Container (type 17) whose accent says the phase (blue thinking, amber acting or waiting for
a person, green answered, red failed, grey stopped), a TextDisplay (10) per piece of text,
Separators (14), a Section (9) for the sources with the ``Sources`` button as its accessory,
and an ActionRow (1) for Stop and the decision buttons. The surface turns a card into a
``discord.ui.LayoutView``; this module imports no discord.

Discord's limits for such a message (``components/reference.mdx``): at most 40 components,
counted recursively (the Container, each child, each button), and 4,000 characters of text
across every TextDisplay. ``card_size`` counts both the way Discord does, and every card
leaves here within them: earlier steps collapse into one ``-#`` line first, the current step
and the status line are cut to fixed shares, and the answer is never the part cut (its
overflow goes to the thread, as in the text layout).

The texts are built by the text layout's helpers (``adapters.discord.render``), so they are
mention-escaped and masked-link-proof the same way; the Sources line names hosts only, and
the Sources button lists the URLs themselves (``sources_list``), never as masked links.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from urllib.parse import quote

from adapters.discord.payload import (
    MAX_FILES,
    Block,
    Card,
    DiscordPayload,
    Rule,
    SourcesSection,
    Text,
)
from adapters.discord.render import (
    approval_block,
    current_step_block,
    final_body,
    fit,
    footer,
    heard_lines,
    page_link_line,
    pending_buttons,
    picture_files,
    question_posts,
    render_brief,
    sanitize,
    split_text,
    status_line,
    step_posts,
    step_summary,
    thread_name,
    totals_post,
    trace_posts,
    trace_reply_parts,
    whole_answer_parts,
)
from adapters.live import ANSWER_PHASES, Phase, RunView, Verbosity
from core.trace import Trace, TraceStep, one_line, source_domain

MAX_COMPONENTS = 40
TEXT_LIMIT = 4000
ROW_BUTTONS = 5
"""Approve, Edit…, Deny, Allow in this conversation, Stop: an ActionRow holds 5 at most."""
HEAD_LIMIT = 400
CURRENT_LIMIT = 2000
STEPS_LIMIT = 1400
"""Characters of the finished steps' lines together; earlier ones collapse past it."""
STEP_LINE_LIMIT = 300
ANSWER_LIMIT = 3000
"""The answer's share of the final card; the rest of a longer answer goes to the thread."""
COMPACT_ANSWER_LIMIT = 1000
SOURCES_TEXT_LIMIT = 300
SOURCES_LIST_LIMIT = 1900
"""The ephemeral reply to the Sources button is plain content: 2,000 characters at most."""
PLAIN_LIMIT = 1900

BLUE, AMBER, GREEN, RED, GREY = 0x5865F2, 0xF0B232, 0x23A55A, 0xDA373C, 0x80848E

ACCENTS: dict[Phase, int] = {
    "starting": BLUE,
    "reading": BLUE,
    "waiting": BLUE,
    "thinking": BLUE,
    "retrying": BLUE,
    "answering": BLUE,
    "acting": AMBER,
    "approval": AMBER,
    "answered": GREEN,
    "refused": AMBER,
    "unformatted": AMBER,
    "best_effort": AMBER,
    "failed": RED,
    "cancelled": GREY,
}
STATUS_ACCENTS = {"answered": GREEN, "cancelled": GREY, "failed": RED}


def row_buttons(payload: DiscordPayload) -> int:
    """Buttons in the card's ActionRow: Stop while the run works, the decisions while one is
    due, 👍 / 👎 under a finished answer."""
    count = 0 if payload.stop_button == "remove" else 1
    count += 2 if payload.votes else 0
    if payload.approval is not None:
        count += 4 if payload.approval.remember else 3
    return count


def card_size(payload: DiscordPayload) -> tuple[int, int]:
    """``(components, characters)`` as Discord counts them for the message ``payload`` makes:
    every component at every depth, and the text of every TextDisplay."""
    card = payload.card
    if card is None:
        return 0, 0
    components, characters = 1, 0  # the Container
    for block in card.blocks:
        match block:
            case Text(content=content):
                components, characters = components + 1, characters + len(content)
            case Rule():
                components += 1
            case SourcesSection(content=content):  # the Section, its TextDisplay, the button
                components, characters = components + 3, characters + len(content)
    components += len(payload.files)
    buttons = row_buttons(payload)
    if buttons:
        components += 1 + buttons
    return components, characters


# ---- the live card ------------------------------------------------------------------------


def collapse_lines(lines: Sequence[str], *, room: int, count: int) -> list[str]:
    """The latest lines that fit in ``room`` characters and ``count`` blocks; the earlier
    ones become a single ``-# … N earlier steps`` line (itself counted in both)."""
    if len(lines) <= count and sum(len(x) for x in lines) <= room:
        return list(lines)
    kept: list[str] = []
    used = 60  # the collapsed line
    for line in reversed(lines):
        if len(kept) + 2 > count or used + len(line) > room:
            break
        kept.append(line)
        used += len(line)
    hidden = len(lines) - len(kept)
    return [f"-# … {hidden:,} earlier step{'' if hidden == 1 else 's'}", *reversed(kept)]


def live_card(view: RunView, now: float) -> Card:
    accent = ACCENTS[view.phase]
    if view.verbosity != "full":
        return Card(accent, (Text(fit(render_brief(view, now, CURRENT_LIMIT), CURRENT_LIMIT)),))
    head = [status_line(view, now)]
    if view.status_text and view.phase not in ("waiting", "retrying", "reading"):
        head.append("-# " + one_line(sanitize(view.status_text), 200))
    if view.memory_unavailable:
        head.append("-# ⚠️ memory unavailable: answering without this conversation's history")
    current = view.current if view.current is not None and not view.current.done else None
    if view.pending is not None:
        block = approval_block(view, view.pending, now, CURRENT_LIMIT - 100)
    else:
        block = current_step_block(view, current, CURRENT_LIMIT - 100) if current else ""
    lines = [fit(step_summary(s), STEP_LINE_LIMIT) for s in view.steps if s.done]
    # Container, transcript, head, separator, current step, the ActionRow with its buttons.
    heard = [Text(line) for line in heard_lines(view)]
    fixed = 1 + len(heard) + 1 + 1 + 1 + 1 + ROW_BUTTONS
    steps = collapse_lines(lines, room=STEPS_LIMIT, count=MAX_COMPONENTS - fixed)
    blocks: list[Block] = [*heard, Text(fit("\n".join(head), HEAD_LIMIT))]
    blocks += [Text(line) for line in steps]
    if block.strip():
        blocks += [Rule(), Text(fit(block, CURRENT_LIMIT))]
    return Card(accent, tuple(blocks))


# ---- the finished card --------------------------------------------------------------------


def card_answer_parts(view: RunView, *, limit: int = ANSWER_LIMIT) -> tuple[str, list[str]]:
    """The answer's part that the card shows, and the rest for the thread."""
    body, _ = final_body(view)
    parts = split_text(body, limit)
    return parts[0] or "(empty answer)", parts[1:]


def hosts_line(urls: Sequence[str], *, limit: int = SOURCES_TEXT_LIMIT) -> str:
    """``-# Sources: fifa.com · wikipedia.org · +2``: host names only, never links; the
    Sources button beside it lists the URLs."""
    names: list[str] = []
    for url in urls:
        name = source_domain(url) if url.startswith(("http://", "https://")) else ""
        name = _inert(one_line(name, 60)) if name else ""
        if name and name not in names:
            names.append(name)
    shown: list[str] = []
    used = len("-# Sources: ")
    for n, name in enumerate(names):
        if used + len(name) + 3 > limit - 20:
            shown.append(f"+{len(names) - n}")
            break
        shown.append(name)
        used += len(name) + 3
    return "-# Sources: " + " · ".join(shown) if shown else ""


_MARKDOWN = re.compile(r"([\\*_~|`>#\[\]()<:])")


def _inert(text: str) -> str:
    """A host name from a tool, shown as plain words: markdown escaped, no mention."""
    return sanitize(_MARKDOWN.sub(r"\\\1", text))


def final_card(
    view: RunView,
    *,
    trace: Trace | None = None,
    limit: int = ANSWER_LIMIT,
    sources: bool = True,
) -> Card:
    _, mark = final_body(view)
    trace = trace or view.trace
    shown, rest = card_answer_parts(view, limit=limit)
    blocks: list[Block] = [*(Text(line) for line in heard_lines(view)), Text(shown)]
    cited = trace.cited if trace is not None and view.phase == "answered" and sources else ()
    line = hosts_line(cited)
    notes = ["-# (the answer goes on in the thread ↓)"] if rest else []
    if view.verbosity != "answer":
        notes.append(footer(trace, view, mark, thread=True))
    if line or notes:
        blocks.append(Rule())
    if line:
        blocks.append(SourcesSection(line))
    if notes:
        blocks.append(Text(fit("\n".join(notes), 600)))
    return Card(ACCENTS[view.phase], tuple(blocks))


# ---- the thread ---------------------------------------------------------------------------


def step_accent(step: TraceStep) -> int:
    if step.error:
        return RED
    return AMBER if step.action else BLUE


def carded(posts: Sequence[DiscordPayload], accent: int | None) -> list[DiscordPayload]:
    return [
        DiscordPayload(
            "",
            p.files[:MAX_FILES],
            stop_button="remove",
            card=Card(accent, (Text(fit(p.content, ANSWER_LIMIT) or "-# (attached)"),)),
        )
        for p in posts
        if p.content.strip() or p.files
    ]


def card_trace_posts(
    trace: Trace, overflow: Sequence[str] = (), *, steps: bool = True
) -> list[DiscordPayload]:
    """The thread as cards: the rest of the answer, the question, a Container per step (red
    for an error, amber for an action), the totals with the trace's ``.json``."""
    head = trace_posts(trace, overflow, steps=False)
    posts = carded(head, None)
    if not steps:
        return posts
    posts += carded(question_posts(trace), GREY)
    for step in trace.steps:
        posts += carded(step_posts(step, subtext=True), step_accent(step))
    totals = totals_post(trace, sources=lambda urls: hosts_line(urls).removeprefix("-# "))
    posts += carded([totals], STATUS_ACCENTS.get(trace.status, AMBER))
    return posts


# ---- the Sources button -------------------------------------------------------------------

_UNSAFE = re.compile(r"[\s()<>\[\]\"'`\\|^{}@\x00-\x1f\x7f]")


def sources_list(urls: Sequence[str], *, limit: int = SOURCES_LIST_LIMIT) -> str:
    """The cited links for the Sources button's private reply: each URL written out (in
    ``<...>``, so it is neither previewed nor a masked link), with characters that could end
    it or mention someone percent-encoded; what does not fit is counted."""
    web = list(dict.fromkeys(u for u in urls if u.startswith(("http://", "https://"))))
    if not web:
        return "This answer cites no web sources."
    lines = ["**Sources**"]
    used = len(lines[0])
    for n, url in enumerate(web, 1):
        line = f"{n}. {_link(url)}"
        if used + len(line) + 1 > limit - 40:
            lines.append(f"-# +{len(web) - n + 1} more in the trace")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def _link(url: str) -> str:
    scheme, _, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    name = source_domain(url)
    if not name or _UNSAFE.search(host) or len(url) > 500:
        shown = _inert(one_line(name or "a link without a readable host", 60))
        return f"{shown} (link too long or malformed to show; it is in the trace)"
    target = f"{scheme}://{host}{slash}" + _UNSAFE.sub(lambda m: quote(m.group(), safe=""), path)
    return f"<{target}>"


# ---- the Renderer -------------------------------------------------------------------------


class ComponentsRenderer:
    """``adapters.live.Renderer`` for Discord's ``components`` layout: every payload holds a
    card (a message with the Components V2 flag can never go back to plain content)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        trace_link: Callable[[str], str | None] | None = None,
    ) -> None:
        self._clock = clock
        self._trace_link = trace_link
        """The signed page of a trace (``bot.web``), posted last in its thread; None: none."""

    def live(self, view: RunView) -> DiscordPayload:
        return DiscordPayload(
            "", approval=pending_buttons(view), card=live_card(view, self._clock())
        )

    def final(self, view: RunView) -> DiscordPayload:
        return DiscordPayload(
            "",
            picture_files(view),
            stop_button="remove",
            thread_name=thread_name(view.question),
            card=final_card(view),
            votes=view.phase == "answered",
        )

    def compact(self, view: RunView) -> DiscordPayload:
        card = final_card(view, limit=COMPACT_ANSWER_LIMIT, sources=False)
        files = picture_files(view)
        return DiscordPayload("", files, "remove", card=card, votes=view.phase == "answered")

    def trace_posts(
        self, trace: Trace, *, whole_answer: bool = False, steps: bool = True
    ) -> list[DiscordPayload]:
        verbosity: Verbosity = "full" if steps else "answer"
        overflow = whole_answer_parts(trace) if whole_answer else card_overflow(trace, verbosity)
        posts = card_trace_posts(trace, overflow, steps=steps)
        link = self._trace_link(trace.id) if steps and self._trace_link is not None else None
        if link is not None:  # in a card of its own
            posts.append(DiscordPayload("", card=Card(GREY, (Text(page_link_line(link)),))))
        return posts

    def trace_reply(self, trace: Trace) -> DiscordPayload:
        """A card in the run's colour: the question, the run's numbers; the files under it."""
        link = self._trace_link(trace.id) if self._trace_link is not None else None
        numbers, question, files = trace_reply_parts(trace, link)
        blocks = (Text(fit(question, ANSWER_LIMIT)), Text(fit(numbers, HEAD_LIMIT)))
        card = Card(STATUS_ACCENTS.get(trace.status, AMBER), blocks)
        return DiscordPayload("", files, stop_button="remove", card=card)

    def plain(self, text: str) -> DiscordPayload:
        card = Card(GREY, (Text(fit(sanitize(text), PLAIN_LIMIT) or "…"),))
        return DiscordPayload("", stop_button="remove", card=card)


def card_overflow(trace: Trace, verbosity: Verbosity = "full") -> list[str]:
    """The part of a long answer that the final card did not show (same split as there)."""
    if trace.status not in ANSWER_PHASES or not trace.answer:
        return []
    view = RunView(
        question=trace.question,
        answer=trace.answer,
        phase=trace.status,
        max_steps=max(0, trace.step_count - 1),
        verbosity=verbosity,
    )
    return card_answer_parts(view)[1]


def card_placeholder() -> DiscordPayload:
    return DiscordPayload("", stop_button="show", card=Card(BLUE, (Text("⏳ Starting…"),)))


__all__ = ["Card", "ComponentsRenderer", "Rule", "SourcesSection", "Text", "card_size"]
