"""Voice notes on Telegram, end to end: the real python-telegram-bot client against the strict
Telegram fake (``voice``, ``audio``, ``video_note`` with their ``duration``; getFile and the
file host), the shared downloader, the real ``openai`` client against the strict speech fake,
the answering pipeline and the scripted model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters import words
from adapters.voice import Hearing
from core.files import MB, FileLimits
from core.scripted import Turn
from core.speech import OpenAISpeaker, OpenAITranscriber
from tests.fakes.speech_server import FakeSpeech
from tests.fakes.spoken import ESPEAK, recognise, speak, word_error_rate
from tests.integration import test_telegram_bot
from tests.integration.test_telegram_bot import CHAT, Harness

make = test_telegram_bot.make
"""The Telegram harness fixture (the real client, the bot, the strict fake)."""

OGG = b"OggS\x00\x02" + bytes(400)
MP4 = b"\x00\x00\x00\x18ftypmp42" + bytes(400)
ANSWER = [Turn("Thought: easy.\nFinal Answer: Paris.")]


@pytest.fixture
async def speech() -> AsyncIterator[tuple[FakeSpeech, Hearing]]:
    async with FakeSpeech() as fake:
        transcriber = OpenAITranscriber(
            "whisper-1",
            base_url=fake.base_url,
            api_key=fake.api_key,
            price_per_minute=0.006,
            max_retries=0,
        )
        yield fake, Hearing(transcriber, max_seconds=300, max_bytes=MB)
        await transcriber.aclose()


def _said(h: Harness) -> list[str]:
    return [m.text for m in h.fake.bot_messages(CHAT)]


async def test_a_voice_note_is_the_question_shown_first_traced_and_costed(
    make: Any, speech: tuple[FakeSpeech, Hearing]
) -> None:
    fake, hearing = speech
    fake.transcript("What is the capital of France?")
    h: Harness = await make(ANSWER, files=FileLimits(max_bytes=MB), hearing=hearing)
    note = h.fake.user_sends(CHAT, voice=(OGG, 7))
    final = await h.answer_to(note)
    assert final.text.startswith("🎤 0:07 · What is the capital of France?")
    assert "Paris." in final.text
    upload = fake.uploads[0]
    assert upload.data == OGG and upload.filename.endswith(".oga")
    assert h.model.calls[0].messages[-1]["content"].endswith("What is the capital of France?")
    trace = (await h.stores.traces.list(f"telegram:{CHAT}"))[0]
    assert trace.question == "What is the capital of France?"
    assert trace.voice is not None
    assert (trace.voice.seconds, trace.voice.model) == (7.0, "whisper-1")
    assert trace.cost_usd == pytest.approx(0.006 * 7 / 60)
    assert "$0.0007" in final.text  # the footer's cost is the note's (the model has no price)
    await h.bot.answering.settled()
    used = await h.bot.answering.budgets.usage(f"telegram:{CHAT}", f"telegram:{CHAT}")
    assert used.user_usd == pytest.approx(0.0007)  # micro-dollars, rounded up
    fake.assert_complete()
    assert h.fake.refused() == []


async def test_a_caption_and_its_voice_note_are_both_the_question(
    make: Any, speech: tuple[FakeSpeech, Hearing]
) -> None:
    fake, hearing = speech
    fake.transcript("and what is its population?")
    h: Harness = await make(ANSWER, files=FileLimits(max_bytes=MB), hearing=hearing)
    note = h.fake.user_sends(
        CHAT, caption="About Paris:", audio=("question.mp3", b"ID3" + bytes(300), "audio/mpeg", 3)
    )
    await h.answer_to(note)
    asked = h.model.calls[0].messages[-1]["content"]
    assert "About Paris:\n\nand what is its population?" in asked
    assert fake.uploads[0].filename == "question.mp3"


async def test_a_round_video_is_heard_too(make: Any, speech: tuple[FakeSpeech, Hearing]) -> None:
    fake, hearing = speech
    fake.transcript("What is the capital of France?")
    h: Harness = await make(ANSWER, files=FileLimits(max_bytes=MB), hearing=hearing)
    final = await h.answer_to(h.fake.user_sends(CHAT, video_note=(MP4, 12)))
    assert final.text.startswith("🎤 0:12 · ")
    assert fake.uploads[0].content_type == "video/mp4"


async def test_a_note_over_max_seconds_is_refused_before_anything_is_fetched_or_sent(
    make: Any, speech: tuple[FakeSpeech, Hearing]
) -> None:
    fake, hearing = speech
    h: Harness = await make([], files=FileLimits(max_bytes=MB), hearing=hearing)
    h.fake.user_sends(CHAT, voice=(OGG, 301))
    refusal = words.voice_too_long(301, 300)
    await h.fake.wait_for(lambda: refusal in _said(h), within=15, what="the refusal")
    assert h.fake.of("getFile") == [] and fake.uploads == []
    h.model.assert_complete()


async def test_silence_is_not_a_question(make: Any, speech: tuple[FakeSpeech, Hearing]) -> None:
    fake, hearing = speech
    fake.transcript("Thank you for watching.")
    h: Harness = await make([], files=FileLimits(max_bytes=MB), hearing=hearing)
    h.fake.user_sends(CHAT, voice=(OGG, 9))
    await h.fake.wait_for(lambda: words.VOICE_SILENT in _said(h), within=15, what="silence")
    h.model.assert_complete()


async def test_a_failing_endpoint_is_one_line(
    make: Any, speech: tuple[FakeSpeech, Hearing]
) -> None:
    fake, hearing = speech
    fake.error(503, "The server is overloaded")
    h: Harness = await make([], files=FileLimits(max_bytes=MB), hearing=hearing)
    h.fake.user_sends(CHAT, voice=(OGG, 4))
    line = words.voice_failed("down")
    await h.fake.wait_for(lambda: line in _said(h), within=15, what="the failure")
    fake.assert_complete()


async def test_without_stt_model_a_voice_note_is_told_so(make: Any) -> None:
    h: Harness = await make([], files=FileLimits(max_bytes=MB))
    h.fake.user_sends(CHAT, voice=(OGG, 4))
    await h.fake.wait_for(lambda: words.VOICE_OFF in _said(h), within=15, what="voice off")
    assert h.fake.of("getFile") == []


@pytest.mark.skipif(ESPEAK is None, reason="espeak-ng is not installed (scripts/ensure-espeak)")
async def test_real_speech_crosses_the_whole_way(
    make: Any, speech: tuple[FakeSpeech, Hearing]
) -> None:
    """espeak-ng speaks a question into a WAV file, sent as a Telegram audio file; the real
    openai client uploads it, the speech fake hears it with pocketsphinx, and what it heard
    is the model's question. pocketsphinx hears espeak-ng poorly (bench/speech_local.py:
    about 70 % of words wrong over a dozen questions), so only this sentence's first half,
    which it hears, is held to a bound."""
    fake, hearing = speech
    spoken = "What is the capital of France"
    wav = speak(spoken)
    fake.hear(recognise)
    h: Harness = await make(ANSWER, files=FileLimits(max_bytes=MB), hearing=hearing)
    final = await h.answer_to(h.fake.user_sends(CHAT, audio=("question.wav", wav, "audio/wav", 2)))
    assert fake.uploads[0].data == wav  # the real audio, whole, over multipart
    heard = recognise(wav)  # the same decoder on the same bytes hears the same words
    assert word_error_rate(spoken, heard) <= 0.6  # "what is the law" (espeak-ng 1.51)
    assert h.model.calls[0].messages[-1]["content"].endswith(heard)
    assert final.text.startswith(f"🎤 0:02 · {heard}")


OPUS = b"OggS\x00\x02" + b"OpusHead" + bytes(300)


@pytest.fixture
async def spoken(speech: tuple[FakeSpeech, Hearing]) -> AsyncIterator[tuple[FakeSpeech, Hearing]]:
    fake, hearing = speech
    speaker = OpenAISpeaker(
        "tts-1", voice="nova", base_url=fake.base_url, api_key=fake.api_key, max_retries=0
    )
    hearing.speaker = speaker
    yield fake, hearing
    await speaker.aclose()


async def test_a_voice_question_is_answered_in_text_and_then_spoken(
    make: Any, spoken: tuple[FakeSpeech, Hearing]
) -> None:
    fake, hearing = spoken
    fake.transcript("What is the capital of France?").speech(OPUS)
    turns = [Turn("Thought: easy.\nFinal Answer: **Paris**, see [the atlas](https://x.example).")]
    h: Harness = await make(turns, files=FileLimits(max_bytes=MB), hearing=hearing)
    final = await h.answer_to(h.fake.user_sends(CHAT, voice=(OGG, 3)))
    await h.bot.answering.settled()
    assert h.fake.voices == [(CHAT, OPUS)]
    (voice,) = [m for m in h.fake.bot_messages(CHAT) if m.timed is not None]
    assert voice.reply_to == final.id and voice.id > final.id  # under the text answer
    (asked,) = fake.speech_requests
    assert asked["model"] == "tts-1" and asked["voice"] == "nova"
    assert asked["response_format"] == "opus"
    assert asked["input"] == "Paris, see the atlas."  # read aloud: no marks, a link by its words
    fake.assert_complete()


async def test_a_typed_question_is_not_spoken(
    make: Any, spoken: tuple[FakeSpeech, Hearing]
) -> None:
    fake, hearing = spoken
    h: Harness = await make(ANSWER, files=FileLimits(max_bytes=MB), hearing=hearing)
    await h.answer_to(h.fake.user_says(CHAT, "What is the capital of France?"))
    await h.bot.answering.settled()
    assert h.fake.voices == [] and fake.speech_requests == []


async def test_a_failing_speech_endpoint_is_one_line_under_the_answer(
    make: Any, spoken: tuple[FakeSpeech, Hearing]
) -> None:
    fake, hearing = spoken
    fake.transcript("What is the capital of France?").error(500, "boom")
    h: Harness = await make(ANSWER, files=FileLimits(max_bytes=MB), hearing=hearing)
    final = await h.answer_to(h.fake.user_sends(CHAT, voice=(OGG, 3)))
    await h.bot.answering.settled()
    assert "Paris." in final.text and h.fake.voices == []
    assert words.NOT_SPOKEN in _said(h)
    fake.assert_complete()
