"""Voice notes without a network: what counts as silence, the limits checked before anything
is fetched, the words a person sees, and how a heard note becomes the question and the
trace's record (its cost in the run's)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters import words
from adapters.voice import Hearing, _upload_name
from bot.config import load_config
from bot.voice import build_hearing
from core.files import MB, FileRefused, Incoming, is_audio
from core.speech import Heard, SpeechError, is_silence, speakable
from core.trace import Trace, clock
from tests.properties import property_settings

INVENTED = [
    "Thank you for watching.",
    "Thanks for watching!",
    "Subtitles by the Amara.org community",
    "[Music]",
    "♪ ♪",
    "Please subscribe to my channel.",
    "you",
    "...",
    "",
]


@pytest.mark.parametrize("text", INVENTED)
def test_what_models_invent_from_silence_is_silence(text: str) -> None:
    assert is_silence(text, 6.0)


@pytest.mark.parametrize(
    ("text", "seconds", "silent"),
    [
        ("Thank you.", 1.0, False),  # a person may say it: a short note that holds it
        ("Thank you.", 8.0, True),  # two words in eight seconds: the rest was silence
        ("Bye.", None, True),  # no length to judge by: the phrase alone
        ("Thanks for watching! What is the time?", 4.0, False),
        ("Where is the nearest train station?", 3.0, False),
    ],
)
def test_short_phrases_count_as_silence_only_on_a_long_quiet_note(
    text: str, seconds: float | None, silent: bool
) -> None:
    assert is_silence(text, seconds) is silent


_REAL_WORDS = st.sampled_from(["weather", "capital", "password", "Paris", "seventeen", "train"])


@property_settings(300)
@given(
    st.lists(st.sampled_from(INVENTED), max_size=4),
    _REAL_WORDS,
    st.sampled_from(["What about the {}?", "Tell me about the {}", "the {} please."]),
    st.floats(0.5, 120),
    st.booleans(),
)
def test_one_real_sentence_among_invented_ones_is_speech(
    invented: list[str], word: str, form: str, seconds: float, first: bool
) -> None:
    real = form.format(word)
    text = " ".join([real, *invented] if first else [*invented, real])
    assert not is_silence(text, seconds)


@property_settings(300)
@given(st.text(max_size=300), st.none() | st.floats(-5, 1e6, allow_nan=False))
def test_any_text_is_judged_without_error(text: str, seconds: float | None) -> None:
    assert isinstance(is_silence(text, seconds), bool)


@property_settings(300)
@given(st.text(max_size=5000), st.none() | st.floats(0, 1e5, allow_nan=False))
def test_the_heard_line_is_one_bounded_line(text: str, seconds: float | None) -> None:
    line = words.heard_line(text, seconds)
    assert "\n" not in line and line.startswith("🎤 ")
    assert len(line) <= words.HEARD_CHARS + len("🎤 ") + len(clock(seconds)) + len(" · ")


def test_clock() -> None:
    assert [clock(s) for s in (None, 0, 7.4, 59.6, 61, 3600)] == [
        "?",
        "0:00",
        "0:07",
        "1:00",
        "1:01",
        "60:00",
    ]


# ---- the Hearing -------------------------------------------------------------------------


@dataclass
class Scripted:
    """A transcriber that answers from a list and records what it was sent."""

    answers: list[Heard | SpeechError]
    sent: list[tuple[str, bytes, float | None]] = field(default_factory=list)
    model: str = "whisper-1"

    async def transcribe(
        self, name: str, data: bytes, *, content_type: str | None, seconds: float | None
    ) -> Heard:
        self.sent.append((name, data, seconds))
        answer = self.answers.pop(0)
        if isinstance(answer, SpeechError):
            raise answer
        return answer


@dataclass(frozen=True)
class FakeAsk:
    ident: str
    question: str
    files: tuple[Incoming, ...]
    heard: Heard | None = None


def note(
    data: bytes = b"OggS" + bytes(100),
    *,
    seconds: float | None = 5.0,
    size: int | None = None,
    name: str = "voice.oga",
    content_type: str | None = "audio/ogg",
    fetched: list[str] | None = None,
) -> Incoming:
    async def fetch() -> bytes:
        if fetched is not None:
            fetched.append(name)
        return data

    declared = len(data) if size is None else size
    return Incoming(name, declared, content_type, f"https://x/{name}", fetch, seconds)


async def test_a_heard_note_becomes_the_question_after_the_text() -> None:
    t = Scripted([Heard("what time is it", 5.0, "whisper-1", 0.0005)])
    hearing = Hearing(t)
    ask = FakeAsk("a1", "Quick one:", (note(),))
    assert await hearing.check(ask) is None
    applied = hearing.apply(ask)
    assert applied.question == "Quick one:\n\nwhat time is it"
    assert applied.heard == Heard("what time is it", 5.0, "whisper-1", 0.0005)
    assert hearing.apply(ask) is ask  # taken once


async def test_limits_are_checked_before_anything_is_fetched() -> None:
    fetched: list[str] = []
    hearing = Hearing(Scripted([]), max_seconds=60, max_bytes=MB)
    assert await hearing.hear([note(seconds=61, fetched=fetched)]) == words.voice_too_long(61, 60)
    too_big = await hearing.hear([note(size=MB + 1, fetched=fetched)])
    assert too_big == words.voice_too_big("1 MB")
    assert fetched == []


async def test_the_25_mb_upload_limit_holds_even_when_files_allow_more() -> None:
    hearing = Hearing(Scripted([]), max_bytes=100 * MB)
    assert await hearing.hear([note(size=26 * MB)]) == words.voice_too_big("25 MB")


async def test_a_note_bigger_than_it_said_is_refused_after_download() -> None:
    hearing = Hearing(Scripted([]), max_bytes=1000)
    got = await hearing.hear([note(b"OggS" + bytes(2000), size=10)])
    assert got == words.voice_too_big("1,000 bytes")


async def test_a_refused_download_is_its_own_line() -> None:
    async def fetch() -> bytes:
        raise FileRefused("voice.oga: Telegram refused it (Invalid file_id).")

    item = Incoming("voice.oga", 10, "audio/ogg", "u", fetch, 3.0)
    assert await Hearing(Scripted([])).hear([item]) == (
        "⚠️ voice.oga: Telegram refused it (Invalid file_id)."
    )


@pytest.mark.parametrize("kind", ["format", "auth", "too_big", "busy", "down", "timeout", "empty"])
async def test_each_failure_is_one_line(kind: Any) -> None:
    got = await Hearing(Scripted([SpeechError(kind)])).hear([note()])
    assert got == words.voice_failed(kind)
    assert isinstance(got, str) and "\n" not in got and "speech service" in got


async def test_silence_and_no_transcriber_are_said() -> None:
    silent = Scripted([Heard("Thank you for watching.", 12.0, "whisper-1")])
    assert await Hearing(silent).hear([note()]) == words.VOICE_SILENT
    assert await Hearing(None).hear([note()]) == words.VOICE_OFF


async def test_two_notes_are_heard_in_order_and_add_up() -> None:
    t = Scripted([Heard("first", 2.0, "m", 0.1), Heard("second", 3.0, "m", 0.2)])
    heard = await Hearing(t).hear([note(name="a.oga"), note(name="b.oga")])
    assert heard == Heard("first\n\nsecond", 5.0, "m", pytest.approx(0.3))
    assert [name for name, _, _ in t.sent] == ["a.oga", "b.oga"]


def test_audio_is_told_by_type_extension_or_length() -> None:
    assert is_audio(note(content_type="audio/webm", name="clip"))
    assert is_audio(note(content_type=None, name="memo.m4a", seconds=None))
    assert is_audio(note(content_type="video/mp4", name="round.mp4", seconds=9))
    assert not is_audio(note(content_type="text/plain", name="a.txt", seconds=None))


@pytest.mark.parametrize(
    ("name", "content_type", "sent"),
    [
        ("voice-message.ogg", "audio/ogg", "voice-message.ogg"),
        ("note.opus", "audio/ogg", "note.ogg"),  # OpenAI knows Ogg, not .opus
        ("clip", "audio/webm", "clip.webm"),
        ("memo.caf", "audio/mp4", "memo.m4a"),
        ("../../x.oga", None, "x.oga"),
    ],
)
def test_the_upload_is_named_by_a_format_the_endpoint_knows(
    name: str, content_type: str | None, sent: str
) -> None:
    assert _upload_name(note(name=name, content_type=content_type)) == sent


# ---- the trace and the config ------------------------------------------------------------


def test_the_trace_keeps_the_voice_and_counts_its_cost() -> None:
    trace = Trace("what time is it", voice=Heard("what time is it", 7.2, "whisper-1", 0.00072))
    again = Trace.from_json(trace.to_json())
    assert again.voice == trace.voice and again.cost_usd == pytest.approx(0.00072)
    assert "**Asked by voice:** 0:07 · whisper-1 · $0.00072" in again.to_markdown()
    assert Trace.from_dict({**trace.to_dict(), "voice": "junk"}).voice is None


def test_stt_reads_its_key_from_the_variable_it_names() -> None:
    env = {"GROQ_KEY": "gsk-1"}
    config = load_config(None, env)
    assert build_hearing(config, [], []).transcriber is None  # no stt.model: off
    env |= {"REACTBOT_STT__MODEL": "whisper-large-v3", "REACTBOT_STT__API_KEY_ENV": "GROQ_KEY"}
    closers: list[Any] = []
    hearing = build_hearing(load_config(None, env), [], closers)
    assert hearing.transcriber is not None and hearing.transcriber.model == "whisper-large-v3"
    assert len(closers) == 1
    notes: list[str] = []
    missing = {"REACTBOT_STT__MODEL": "whisper-1"}
    assert build_hearing(load_config(None, missing), notes, []).transcriber is None
    assert notes == ["Voice notes are not heard: set OPENAI_API_KEY for stt.model whisper-1."]


# ---- spoken answers ----------------------------------------------------------------------


def test_an_answer_is_read_without_its_marks() -> None:
    answer = (
        "## Paris\n**Paris** is the capital (see [the atlas](https://x.example)).\n```py\nx=1\n```"
    )
    assert speakable(answer, 200) == "Paris Paris is the capital (see the atlas)."


def test_a_long_answer_is_cut_after_a_sentence() -> None:
    answer = "One sentence here. " * 20
    said = speakable(answer, 100)
    assert said.endswith("here.") and len(said) <= 100


@property_settings(300)
@given(st.text(max_size=3000), st.integers(1, 500))
def test_what_is_spoken_is_bounded_and_unmarked(text: str, limit: int) -> None:
    said = speakable(text, limit)
    assert len(said) <= limit + 1  # the ellipsis of a cut
    assert not any(mark in said for mark in "*_#>|~`")
