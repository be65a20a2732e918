"""What the internet sends, as hypothesis strategies: for the renderers' property tests.

``hostile_text()`` mixes long and many URLs, long unbroken words, unbalanced and nested code
fences, right-to-left and combining characters, emoji, CJK, empty strings, mention and link
markup for both platforms. ``runs()`` draws whole runs (up to 50 steps) as the core events a
renderer consumes, ending in any final state, with the matching Trace.
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass, fields
from typing import Any

from hypothesis import strategies as st

from core.events import (
    ActionDecided,
    AnswerDelta,
    Cancelled,
    Event,
    Failed,
    Finished,
    FormatRetry,
    Notice,
    ObservationReady,
    ReasoningDelta,
    RunStarted,
    StepStarted,
    ThoughtDelta,
)
from core.trace import Trace, TraceStep
from tests.properties import PROFILE

FENCE = "```"

PIECES = [
    "@everyone",
    "@here",
    "<@123456789012345678>",
    "<@&123456789012345678>",
    "<@!123456789012345678>",
    "<!channel>",
    "<!here>",
    "<!everyone>",
    "<@U0123ABCD>",
    "<#C0123ABCD>",
    "<https://evil.example/login|Verify your account>",
    "[Verify your account](https://evil.example/login)",
    "[x](<https://evil.example>)",
    "&lt;!channel&gt;",
    "&amp;",
    "&",
    "<",
    ">",
    FENCE,
    FENCE + "python\n",
    "\n" + FENCE + "\n",
    "````",
    "`",
    "*",
    "_",
    "~",
    "|",
    "||spoiler||",
    "> quote",
    "-# subtext",
    "# heading",
    "\\",
    "\n",
    "\n\n",
    " ",
    "\t",
    "\r\n",
    "\u202e",  # right-to-left override
    "\u200f",
    "مرحبا بالعالم",
    "שלום",
    "e\u0301\u0301\u0301",  # combining marks
    "Z\u0351\u0352\u0353\u0354",
    "👩‍👩‍👧‍👦",
    "🇫🇷",
    "😀" * 10,
    "东京的人口是多少",
    "日本語のテキスト",
    "한국어",
    "\u200b",
    "\x1b]8;;https://evil.example\x1b\\Verify your account\x1b]8;;\x1b\\",  # OSC 8 link
    "\x1b[2J\x1b[H",  # clear the screen
    "\x1b]0;window title\x07",
    "\x9b31m",  # a C1 control sequence introducer
    "\x00",
    "\ufffd",
]


def url(length: int) -> str:
    base = "https://example.com/"
    return base + "a" * max(0, length - len(base))


urls = st.one_of(
    st.sampled_from(
        [
            "https://en.wikipedia.org/wiki/Mercury_(planet)",
            "https://bank.example@evil.example/login",
            "https://пример.рф/путь",
            "http://[::1]:8080/x",
            "https://evil.example/a)b](c<d>e|f",
            "https://x.example/" + "%" * 50,
            "https://ev[il.example/",
            "javascript:alert(1)",
            "ftp://files.example/x",
            "not a url",
            "",
        ]
    ),
    st.integers(min_value=20, max_value=2500).map(url),
)

long_words = st.integers(min_value=100, max_value=6000).map(lambda n: "y" * n)

fragments = st.one_of(
    st.sampled_from(PIECES),
    urls,
    long_words,
    st.text(max_size=40),
    st.text(alphabet="`\n *_~>#[]()<>!@&|", max_size=30),
)


@st.composite
def hostile_text(draw: st.DrawFn, *, max_pieces: int = 12) -> str:
    """Concatenated fragments; sometimes empty, sometimes tens of thousands of characters."""
    return "".join(draw(st.lists(fragments, max_size=max_pieces)))


@dataclass(frozen=True)
class DrawnRun:
    events: list[Event]
    """Every event of the run, the final one last (if the run ended)."""
    trace: Trace

    def __repr__(self) -> str:
        # A failing example is printed: whole texts would make a repr of megabytes.
        shown = [
            type(e).__name__ + "(" + ", ".join(_short(getattr(e, f.name)) for f in fields(e)) + ")"
            for e in self.events
        ]
        return f"DrawnRun({len(self.events)} events: {'; '.join(shown)})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # hypothesis prints with it
        printer.text(repr(self))


_REPR = reprlib.Repr()
_REPR.maxstring, _REPR.maxother = 80, 40


def _short(value: object) -> str:
    return _REPR.repr(value) if not isinstance(value, Trace) else "<trace>"


RUN_STEPS = 50 if PROFILE == "thorough" else 25
"""The most steps a drawn run has unless a test says: 50 (``agent.max_steps``' ceiling) under
the thorough profile; 25 under ``ci``, where each example costs half as much to draw and
render (the 40-component and 50-step limits have tests of their own on built runs)."""


@st.composite
def runs(
    draw: st.DrawFn, *, max_steps: int | None = None, finished: bool | None = None
) -> DrawnRun:
    """A whole run as events, and its Trace; ``finished=None`` may leave it mid-way."""
    max_steps = RUN_STEPS if max_steps is None else max_steps
    text = hostile_text()
    question = draw(text)
    limit = draw(st.integers(min_value=1, max_value=max_steps))
    trace = Trace(question=question, user=draw(text), models=["scripted"])
    trace.started_at, trace.ended_at = 10.0, 20.0
    events: list[Event] = [RunStarted(trace.id, question, "scripted", limit)]
    steps = draw(st.integers(min_value=0, max_value=limit))
    all_sources: list[str] = []
    for n in range(1, steps + 1):
        thought, action, arg = draw(text), draw(text), draw(text)
        observation = draw(text)
        sources = tuple(draw(st.lists(urls, max_size=4)))
        error = draw(st.booleans())
        events.append(StepStarted(n, limit))
        if draw(st.booleans()):
            events.append(ReasoningDelta(n, draw(text)))
        events.append(ThoughtDelta(n, thought, labelled=draw(st.booleans())))
        if draw(st.integers(min_value=0, max_value=9)) == 0:
            events.append(FormatRetry(n, 1, draw(text)))
        events.append(ActionDecided(n, action, arg))
        events.append(ObservationReady(n, action, observation, error, 0.1, sources))
        trace.steps.append(
            TraceStep(
                n,
                thought=thought,
                action=action,
                action_input=arg,
                observation=observation,
                error=observation if error else None,
                sources=list(sources),
                started_at=10.0 + n,
                ended_at=10.5 + n,
                prompt_tokens=draw(st.integers(min_value=0, max_value=10**7)),
                completion_tokens=7,
            )
        )
        all_sources += sources
    if draw(st.booleans()):
        events.append(Notice(draw(st.sampled_from(["memory", "retrying", "waiting"])), draw(text)))
    final_step = steps + 1
    events.append(StepStarted(final_step, limit, draw(st.sampled_from(["step", "answer"]))))
    events.append(ThoughtDelta(final_step, draw(text)))
    answer = draw(hostile_text(max_pieces=30))
    for part in draw(st.lists(text, max_size=3)):
        events.append(AnswerDelta(final_step, part))
    trace.steps.append(TraceStep(final_step, kind="final", thought="t", raw=draw(text)))
    end = draw(st.booleans()) if finished is None else finished
    if not end:
        return DrawnRun(events, trace)
    trace.cited = draw(st.lists(st.sampled_from(all_sources), max_size=5)) if all_sources else []
    kind = draw(st.sampled_from(["answered", "unformatted", "best_effort", "failed", "cancelled"]))
    if kind == "failed":
        reason = draw(text)
        trace.status, trace.reason = "failed", reason
        events.append(Failed(trace, reason, "model"))
    elif kind == "cancelled":
        by = draw(st.one_of(st.none(), text))
        trace.status, trace.stopped_by = "cancelled", by
        events.append(Cancelled(trace, by))
    else:
        trace.status, trace.answer = kind, answer  # type: ignore[assignment]
        events.append(Finished(trace, answer, kind))  # type: ignore[arg-type]
    return DrawnRun(events, trace)


def pdf_bomb(*, pages: int = 5, repeats: int = 400_000) -> bytes:
    """The PDF of issue 26: one Flate-compressed content stream, ``BT /F1 12 Tf 10 10 Td (Hi)
    Tj ET`` then ``q Q `` ``repeats`` times, shared by every page. About 2.8 KB; reading it
    takes about two seconds of CPU and 150 MB per page (pypdf parses every operator)."""
    import io

    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    font_ref = writer._add_object(font)
    content = DecodedStreamObject()
    content.set_data(b"BT /F1 12 Tf 10 10 Td (Hi) Tj ET " + b"q Q " * repeats)
    shared = writer._add_object(content.flate_encode())
    for _ in range(pages):
        page = writer.add_blank_page(width=612, height=792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font_ref})}
        )
        page[NameObject("/Contents")] = shared
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
