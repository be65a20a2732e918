"""A run as Telegram shows it: one message in Telegram's HTML parse mode, edited live.

Four styles, one per part of a step: the thought in *italic* (💭), the action in **bold** with
its input in ``code`` (🛠), the observation in a block quote, the answer drawn from its
Markdown (``markdown_html``: bold, italic, strike, code, headings, bullets, quotes, code
blocks, tables aligned in a ``<pre>`` block by ``adapters.tables``; a link's URL always
visible). Every
text from outside (a model's, a tool's, a person's) goes through ``html.escape`` and nothing
else: this module writes every tag itself, never an ``<a>``, so no masked link and no
``tg://user?id=`` mention can come from model text (a URL stays visible text, which Telegram
links by itself). Bidirectional overrides are replaced, so they cannot reorder what is shown.

Telegram counts a message's 4,096 characters after entity parsing, in UTF-16 code units:
each field is cut in those units *before* it is escaped, so the text Telegram counts is
exactly the sum of the pieces (``fits``). The final answer is split at the limit: the first
part in the message, the rest as replies (``trace_posts``). Payloads compare by value, so
the live message never sends the same state twice ("message is not modified").
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from adapters import words
from adapters.live import RunView, StepView, final_mark, status_line
from adapters.tables import FENCE_LINE, tables_as_code
from core.pictures import pictures_of
from core.text import neutral_bidi
from core.trace import Trace, TraceStep, summary_line

MESSAGE_UNITS = 4096
"""Telegram's limit of a message's text after entity parsing (UTF-16 code units)."""
THOUGHT_UNITS = 600
INPUT_UNITS = 300
OBSERVATION_UNITS = 500
LIVE_ANSWER_UNITS = 2000
QUESTION_UNITS = 200
STEPS_SHOWN = 6
"""The latest steps a live message shows; earlier ones are counted in one line."""
CAPTION_UNITS = 1024
"""A document's caption, after entity parsing."""
TRACE_MESSAGES = 3
"""Replies that show the steps under an answer; the .md and .json documents have them all."""
TRACE_THOUGHT_UNITS = 1200
TRACE_OBSERVATION_UNITS = 800
MAX_REPLIES = 5
"""Replies that continue an answer too long for its message (about 20,000 characters in
all); what is beyond them is said in one more line (the stored trace has all of it)."""
STOP_PREFIX = "stop:"
"""``callback_data`` of the Stop button: ``stop:<run id>:<asker's user id>`` (at most 38
bytes, under Telegram's 64): the process a press reaches may not be the one running it."""
CALLBACK_BYTES = 64
RETRY_PREFIX = "retry:"
"""``callback_data`` of Retry under an interrupted answer: ``retry:<run id>``."""
VOTE_PREFIX = "vote:"
"""``vote:up:<run>`` / ``vote:down:<run>``: 👍 / 👎 under a finished answer."""
DECIDE_PREFIX = "ok:"
"""``callback_data`` of a decision: ``ok:<verdict>:<run>:<step>:<call>:<asker>`` (verdict
``a``pprove, ``d``eny or ``w``, always; ``e``dit and ``r``eason ask for a reply first: at
most 52 bytes)."""
VERDICTS = {"a": "approve", "d": "deny", "w": "always"}
PROMPTS = {"e": "edit", "r": "deny"}
"""Decisions that need words: a ForceReply prompt asks for them (Telegram has no modal)."""
PROMPT_REF = re.compile(r"ref ([er]):([0-9A-Za-z_-]{1,40}):(\d{1,9}):(\d{1,9}):(\d{0,20})")
"""The last line of a prompt: which pending action a reply to it decides. Read back from the
replied-to message (the bot's own, which Telegram includes in the reply), so any process
can take the reply; only the last line counts (``prompt_ref``), not one the input shown
above it may hold."""
PROMPT_INPUT_UNITS = 3000


@dataclass(frozen=True, slots=True)
class Button:
    text: str
    data: str


@dataclass(frozen=True, slots=True)
class Document:
    name: str
    content: bytes


@dataclass(frozen=True, slots=True)
class ReplyPrompt:
    """A ForceReply: the person's app opens a reply to the message, with this placeholder;
    ``selective``: only for the people the message @mentions."""

    placeholder: str
    selective: bool = False


@dataclass(frozen=True, slots=True)
class TelegramPayload:
    """One state of the message: its HTML (``parse_mode`` HTML) and its inline buttons (or
    a ForceReply); or a document sent with its HTML as the caption."""

    html: str
    buttons: tuple[Button, ...] = ()
    document: Document | None = None
    prompt: ReplyPrompt | None = None
    photo: Document | None = None
    """A picture a tool returned, sent with ``sendPhoto`` under the answer."""
    spoken: str | None = None
    """An answer to a voice question, to be spoken (``tts.*``) and sent with ``sendVoice``."""
    voice: Document | None = None
    """The spoken answer's Ogg/Opus audio (``Chat.send`` makes it from ``spoken``)."""


def units(text: str) -> int:
    """``text``'s length as Telegram counts it (UTF-16 code units)."""
    return len(text.encode("utf-16-le")) // 2


def cut(text: str, limit: int) -> str:
    """At most ``limit`` UTF-16 units of ``text`` (never half a surrogate pair), with ``…``
    when something was left out."""
    if units(text) <= limit:
        return text
    kept, used = [], 0
    for char in text:
        size = units(char)
        if used + size > limit - 1:
            break
        kept.append(char)
        used += size
    return "".join(kept) + "…"


def inert(text: str) -> str:
    """Outside text made safe to show: bidi controls replaced, then HTML-escaped."""
    return html.escape(neutral_bidi(text))


@dataclass(frozen=True, slots=True)
class _Piece:
    """One run of text in one style; ``units`` is what Telegram will count of it."""

    text: str
    style: str = ""
    """``b``, ``i``, ``code``, ``blockquote`` or plain."""

    @property
    def units(self) -> int:
        return units(self.text)

    def html(self) -> str:
        body = inert(self.text)
        return f"<{self.style}>{body}</{self.style}>" if self.style and self.text else body


def _join(lines: Sequence[Sequence[_Piece]]) -> str:
    return "\n".join("".join(p.html() for p in line) for line in lines if line).strip()


def _size(lines: Sequence[Sequence[_Piece]]) -> int:
    return sum(p.units for line in lines for p in line) + max(0, len(lines) - 1)


def split_answer(text: str, limit: int) -> list[str]:
    """``text`` in parts of at most ``limit`` UTF-16 units, each ending at a line break or a
    space where one is in its second half (no part is empty; nothing is lost but the
    whitespace split on). Linear in ``text``."""
    text, parts = text.strip(), []
    start, n = 0, len(text)
    while start < n:
        end, used = start, 0
        while end < n and used + (size := 2 if ord(text[end]) > 0xFFFF else 1) <= limit:
            used, end = used + size, end + 1
        end = max(end, start + 1)
        if end < n:
            at = max(text.rfind("\n", start, end), text.rfind(" ", start, end))
            if at > start + (end - start) // 2:
                end = at
        if part := text[start:end].rstrip():
            parts.append(part)
        start = end
        while start < n and text[start].isspace():
            start += 1
    return parts


# ---- a model's Markdown, as Telegram HTML --------------------------------------------------

_FENCE_LINE = FENCE_LINE
_HEADING = re.compile(r"^[ ]{0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_BULLET = re.compile(r"^([ \t]*)[-*+][ \t]+(.*)$")
_QUOTE = re.compile(r"^[ ]{0,3}>[ \t]?(.*)$")
# Each alternative stops at its next delimiter: linear in the line.
_INLINE = re.compile(
    r"`(?P<code>[^`\n]{1,2000})`"
    r"|\[(?P<label>[^\[\]\n]{0,500})\]\((?P<url>[^\s()<>]{1,2000})\)"
    r"|(?P<bm>\*\*|__)(?=\S)(?P<bold>[^*_\n]{1,2000}?)(?<=\S)(?P=bm)"
    r"|(?<![\w*])\*(?=[^\s*])(?P<em>[^*\n]{1,2000}?)(?<=\S)\*(?![\w*])"
    r"|~~(?=\S)(?P<strike>[^~\n]{1,2000}?)(?<=\S)~~"
)


def markdown_html(text: str, *, in_code: bool = False) -> tuple[str, bool]:
    """One part of an answer, its Markdown as Telegram HTML: bold, italic, strike, inline
    code, headings (a bold line), bullets (•), quotes, fenced code (``<pre>``). Everything is
    escaped; a link shows its text and then its URL as text (Telegram links a bare URL
    itself, and never as a masked link). ``in_code``: the part starts inside a code block
    the previous part left open; returns whether this one leaves one open (it is closed
    here and reopened in the next part)."""
    out: list[str] = []
    code: list[str] | None = [] if in_code else None
    for line in text.split("\n"):
        if _FENCE_LINE.match(line):
            if code is None:
                code = []
            else:
                out.append(f"<pre>{inert(chr(10).join(code))}</pre>")
                code = None
            continue
        if code is not None:
            code.append(line)
            continue
        out.append(_markdown_line(line))
    if code is not None:
        out.append(f"<pre>{inert(chr(10).join(code))}</pre>")
    return "\n".join(out), code is not None


def _markdown_line(line: str) -> str:
    if heading := _HEADING.match(line):
        return f"<b>{_inline(heading.group(1).replace('**', ''))}</b>" if heading.group(1) else ""
    if bullet := _BULLET.match(line):
        depth = min(len(bullet.group(1).expandtabs(4)) // 2, 6)
        return "  " * depth + "• " + _inline(bullet.group(2))
    if quoted := _QUOTE.match(line):  # an empty quote shows nothing, like an empty heading
        return (
            f"<blockquote>{_inline(quoted.group(1))}</blockquote>"
            if quoted.group(1).strip()
            else ""
        )
    return _inline(line)


def _inline(line: str) -> str:
    out: list[str] = []
    at = 0
    for match in _INLINE.finditer(line):
        out.append(inert(line[at : match.start()]))
        groups = match.groupdict()
        if groups["code"] is not None:
            out.append(f"<code>{inert(groups['code'])}</code>")
        elif groups["url"] is not None:
            label, url = groups["label"].strip(), groups["url"]
            same = not label or label.rstrip("/") == url.rstrip("/")
            out.append(inert(url) if same else f"{_inline(label)} ({inert(url)})")
        elif groups["bold"] is not None:
            out.append(f"<b>{inert(groups['bold'])}</b>")
        elif groups["em"] is not None:
            out.append(f"<i>{inert(groups['em'])}</i>")
        else:
            out.append(f"<s>{inert(groups['strike'])}</s>")
        at = match.end()
    out.append(inert(line[at:]))
    return "".join(out)


def answer_parts_html(parts: Sequence[str]) -> list[str]:
    """Each part of a split answer as HTML, a code block cut between parts closed at the
    end of one and reopened at the start of the next."""
    shown, open_code = [], False
    for part in parts:
        html_part, open_code = markdown_html(part, in_code=open_code)
        if not _TAG.sub("", html_part).strip():
            # Markdown that shows nothing (a lone fence, an empty quote): Telegram refuses a
            # message with no text, so the part is shown as it was written.
            html_part = inert(part)
        shown.append(html_part)
    return shown


_TAG = re.compile(r"<[^<>]*>")
"""One of our own tags: everything of the model's is escaped (``inert``)."""


def status(view: RunView, now: float) -> str:
    """``🔎 Searching · step 2/8 · 3.4 s``; the seconds stand still while a person
    decides, so the message is not edited every tick meanwhile."""
    return status_line(view, now, shown=lambda name: cut(name, 40), still_while_pending=True)


def _heard(view: RunView) -> list[list[_Piece]]:
    """First: a scheduled run's header and its question (no message of the asker's is above
    it), or a voice question's transcript (``words.heard_line``)."""
    if view.header:
        return [[_Piece(cut(view.header, 300), "b")], [_Piece(cut(view.question, 700), "i")]]
    return [[_Piece(cut(view.heard, 700), "i")]] if view.heard else []


def _step_lines(step: StepView) -> list[list[_Piece]]:
    return _parts_of(step, thought_units=THOUGHT_UNITS, observation_units=OBSERVATION_UNITS)


def _trace_step_lines(step: TraceStep) -> list[list[_Piece]]:
    """A step of the stored trace: its number, then thought, action and observation in the
    live message's styles, each bounded (the documents have them whole)."""
    head = f"Step {step.index}" + (f", call {step.call + 1}" if step.call else "")
    if step.kind == "final":
        head += " (final answer)"
    parts = _parts_of(
        step, thought_units=TRACE_THOUGHT_UNITS, observation_units=TRACE_OBSERVATION_UNITS
    )
    return [[_Piece(head, "u")], *parts]


def _parts_of(
    step: StepView | TraceStep, *, thought_units: int, observation_units: int
) -> list[list[_Piece]]:
    """Thought (italic), action and its input (bold, code), observation (a quote)."""
    lines: list[list[_Piece]] = []
    if step.thought.strip():
        lines.append([_Piece("💭 "), _Piece(cut(step.thought.strip(), thought_units), "i")])
    if step.action:
        line = [_Piece(f"🛠 {cut(step.action, 60)}", "b")]
        if step.action_input is not None:
            line += [_Piece(" "), _Piece(cut(step.action_input, INPUT_UNITS) or " ", "code")]
        lines.append(line)
    if step.observation is not None:
        shown = cut(step.observation.strip() or "(empty)", observation_units)
        lines.append([_Piece(("⚠️ " if step.error else "") + shown, "blockquote")])
    return lines


class TelegramRenderer:
    """``adapters.live.Renderer`` for Telegram."""

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
        self._answer = ""
        self._rest: list[str] = []
        self._rest_html: list[str] = []
        """What ``final`` showed of the answer, and the parts it left for replies."""

    # ---- live -----------------------------------------------------------------------------
    def live(self, view: RunView) -> TelegramPayload:
        head = [[_Piece(status(view, self._clock()), "b")]]
        if view.verbosity == "answer":
            head = [[_Piece(f"⏳ Working on it · {view.elapsed(self._clock()):.1f} s", "b")]]
        head = _heard(view) + head
        answer = [[_Piece(cut(view.answer.strip(), LIVE_ANSWER_UNITS))]] if view.answer else []
        pending = self._pending(view)
        room = MESSAGE_UNITS - _size(head) - _size(answer) - _size(pending) - 3
        steps = self._steps(view, room)
        buttons = (*self._decisions(view), self._stop(view))
        return TelegramPayload(_join(head + steps + answer + pending), buttons)

    def _pending(self, view: RunView) -> list[list[_Piece]]:
        """The action waiting for a person, at every verbosity: the run waits on it."""
        pending = view.pending
        if pending is None:
            return []
        who = words.deciders(view.approvers)
        return [
            [_Piece("✋ Approve this action?", "b")],
            [_Piece(f"🛠 {cut(pending.name, 60)}", "b"), _Piece(" "),
             _Piece(cut(pending.input, INPUT_UNITS) or " ", "code")],
            [_Piece(f"Who may decide: {who}; no decision in {pending.timeout:.0f} s is a denial.",
                    "i")],
        ]  # fmt: skip

    def _decisions(self, view: RunView) -> tuple[Button, ...]:
        pending = view.pending
        if pending is None:
            return ()
        named = words.BUTTONS
        offered = [("a", named["approve"]), ("e", named["edit"]), ("d", named["deny"]),
                   ("r", named["reason"])]  # fmt: skip
        if pending.remember:
            offered.append(("w", named["always"]))
        tail = f"{self.run_id}:{pending.step}:{pending.call}:{view.asker}"
        return tuple(
            Button(str(label), data)
            for verdict, label in offered
            if len((data := f"{DECIDE_PREFIX}{verdict}:{tail}").encode()) <= CALLBACK_BYTES
        )

    def _stop(self, view: RunView) -> Button:
        data = f"{STOP_PREFIX}{self.run_id}:{view.asker}"
        if len(data.encode()) > CALLBACK_BYTES:  # (user ids are digits: never, but bounded)
            data = f"{STOP_PREFIX}{self.run_id}:"
        return Button(str(words.BUTTONS["stop"]), data)

    def _steps(self, view: RunView, room: int) -> list[list[_Piece]]:
        """The latest steps that fit in ``room`` units, and a line counting the others."""
        if view.verbosity != "full":
            return []
        shown: list[list[_Piece]] = []
        count = 0
        for step in reversed(view.steps[-STEPS_SHOWN:]):
            lines = _step_lines(step)
            if _size(shown + lines) + 40 > room:
                break
            shown, count = lines + shown, count + 1
        if (earlier := len(view.steps) - count) > 0:
            plural = "s" if earlier != 1 else ""
            shown.insert(0, [_Piece(f"… {earlier} earlier step{plural}", "i")])
        return shown

    # ---- final ----------------------------------------------------------------------------
    def final(self, view: RunView) -> TelegramPayload:
        footer = self._footer(view)
        outcome = _heard(view) + self._outcome(view)
        room = MESSAGE_UNITS - _size(footer) - _size(outcome) - 2
        answer = tables_as_code(view.answer)  # before the split: it counts the padding too
        parts = split_answer(answer, room) if answer else []
        self._answer, self._rest = answer, parts[1:]
        shown = answer_parts_html(parts)
        self._rest_html = shown[1:]
        body = "\n".join(filter(None, [_join(outcome), *shown[:1], _join(footer)]))
        return TelegramPayload(body.strip(), self._votes(view))

    def _votes(self, view: RunView) -> tuple[Button, ...]:
        """👍 / 👎 under an answered run: anyone may vote (``adapters.dispatch``)."""
        if view.phase != "answered":
            return ()
        named = words.BUTTONS
        return tuple(Button(str(named[value]), vote_data(value, self.run_id)) for value in VOTES)

    def compact(self, view: RunView) -> TelegramPayload:
        outcome = _heard(view) + self._outcome(view)
        body = [[_Piece(cut(view.answer.strip(), 1000))]] if view.answer.strip() else []
        return TelegramPayload(_join(outcome + body + self._footer(view)), self._votes(view))

    def plain(self, text: str) -> TelegramPayload:
        return TelegramPayload(inert(cut(text.strip() or "…", 1000)))

    def _outcome(self, view: RunView) -> list[list[_Piece]]:
        if view.phase == "cancelled":
            stopped = words.stopped(view.stopped_by, view.steps_made, shown=lambda w: cut(w, 80))
            return [[_Piece(f"⏹️ {stopped}", "b")]]
        if view.phase == "failed":
            return [[_Piece("❌ " + cut(view.reason or "The run failed.", 600), "b")]]
        if view.phase == "best_effort":
            return [[_Piece("⚠️ Stopped before a final answer: the best answer found.", "b")]]
        return []

    def _footer(self, view: RunView) -> list[list[_Piece]]:
        trace = view.trace
        mark = final_mark(view.phase)
        line = f"{mark} " + (summary_line(trace) if trace else f"{view.elapsed():.1f} s")
        if view.memory_unavailable:
            line += " · ⚠️ memory unavailable"
        return [[_Piece(cut(line, 300), "i")]]

    # ---- after the answer -----------------------------------------------------------------
    def trace_posts(
        self, trace: Trace, *, whole_answer: bool = False, steps: bool = True
    ) -> list[TelegramPayload]:
        """Replies under the answer: the answer's parts that did not fit in its message (the
        whole answer, when the message could show only a smaller form), at most
        ``MAX_REPLIES``; the pictures its tools returned (``core.pictures``); then, with
        ``steps``, the steps (at most ``TRACE_MESSAGES``) and the
        trace as ``.md`` and ``.json`` documents, the trace page's link in the caption."""
        if whole_answer:
            parts = split_answer(self._answer, MESSAGE_UNITS)
            htmls = answer_parts_html(parts)
        else:  # what did not fit in the message, a code block it left open reopened
            parts, htmls = self._rest, self._rest_html
        posts = [TelegramPayload(h) for h in htmls[:MAX_REPLIES] if h.strip()]
        posts += [TelegramPayload("", photo=Document(p.name, p.data)) for p in pictures_of(trace)]
        if trace.voice is not None and trace.status == "answered" and trace.answer:
            posts.append(TelegramPayload("", spoken=trace.answer))  # asked by voice: heard back
        if left := sum(units(p) for p in parts[MAX_REPLIES:]):
            posts.append(TelegramPayload(f"<i>… {left:,} more characters of the answer are "
                                         "in its trace.</i>"))  # fmt: skip
        if steps:
            posts += self._step_posts(trace)
            posts += self.documents(trace)
        return posts

    def _step_posts(self, trace: Trace) -> list[TelegramPayload]:
        """The steps, packed into messages of at most 4,096 units, at most ``TRACE_MESSAGES``."""
        messages: list[list[list[_Piece]]] = [[]]
        shown = 0
        for step in trace.steps:
            lines = _trace_step_lines(step)
            if _size(messages[-1] + lines) + 60 > MESSAGE_UNITS:
                if len(messages) == TRACE_MESSAGES:
                    break
                messages.append([])
            messages[-1] += lines
            shown += 1
        if (more := len(trace.steps) - shown) > 0:
            plural = "s" if more != 1 else ""
            messages[-1].append([_Piece(f"… {more} more step{plural} in the .md", "i")])
        return [TelegramPayload(_join(m)) for m in messages if m]

    def documents(self, trace: Trace) -> list[TelegramPayload]:
        """The trace as ``.md`` and ``.json`` documents (also ``/trace``'s reply)."""
        caption = [[_Piece(cut(f"🧾 Trace {trace.id} · {summary_line(trace)}", 400), "b")]]
        link = self._trace_link(trace.id) if self._trace_link is not None else None
        if link:  # our own signed URL, shown as text (Telegram links it)
            caption.append([_Piece(cut(link, CAPTION_UNITS - 500))])
        markdown = Document(f"trace-{trace.id}.md", trace.to_markdown().encode())
        data = Document(f"trace-{trace.id}.json", trace.to_json(indent=2).encode())
        return [
            TelegramPayload(_join(caption), document=markdown),
            TelegramPayload("", document=data),
        ]


VOTES = ("up", "down")


def vote_data(value: str, run_id: str) -> str:
    """A vote's ``callback_data`` (a run id is 12 hex digits: within 64 bytes always)."""
    return f"{VOTE_PREFIX}{value}:{run_id}"[:CALLBACK_BYTES]


def voted(data: str) -> tuple[str, str] | None:
    """``(value, run_id)`` of a vote's ``callback_data``; None for anything else."""
    value, _, run_id = data.removeprefix(VOTE_PREFIX).partition(":")
    return (value, run_id) if value in ("up", "down") and run_id else None


def retry_data(run_id: str) -> str:
    """Retry's ``callback_data``, within 64 bytes (a run id is 12 hex digits: always)."""
    data = f"{RETRY_PREFIX}{run_id}"
    return data if len(data.encode()) <= CALLBACK_BYTES else RETRY_PREFIX


def prompt_ref(text: str) -> re.Match[str] | None:
    """The ``PROMPT_REF`` of a prompt's text as Telegram gives it back: its last line."""
    return PROMPT_REF.fullmatch(text.rsplit("\n", 1)[-1])


def decision_prompt(
    kind: str, *, tool: str, current: str, ref: str, mention: str | None = None
) -> TelegramPayload:
    """The ForceReply asking for an edited input (``kind`` ``e``) or a denial's reason
    (``r``); its last line is ``ref <kind>:<run>:<step>:<call>:<asker>`` (``PROMPT_REF``).
    ``mention``: the presser's @username, so a group's ForceReply is for them alone."""
    lines: list[list[_Piece]] = []
    if mention:
        lines.append([_Piece(f"@{cut(mention, 40)}")])
    if kind == "e":
        lines += [
            [_Piece(f"✏️ Reply to this message with the new input for {cut(tool, 60)}.", "b")],
            [_Piece("Now: "), _Piece(cut(current, PROMPT_INPUT_UNITS) or " ", "code")],
        ]
        placeholder = "The new input"
    else:
        lines.append([_Piece(f"💬 Reply to this message with why {cut(tool, 60)} should not "
                             "run.", "b")])  # fmt: skip
        placeholder = "Why not"
    lines.append([_Piece(f"ref {kind}:{ref}", "i")])
    return TelegramPayload(_join(lines), prompt=ReplyPrompt(placeholder, selective=bool(mention)))
