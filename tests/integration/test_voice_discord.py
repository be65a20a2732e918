"""Discord voice messages, end to end: the real discord.py client against the strict fake (a
message flagged ``IS_VOICE_MESSAGE`` with no content and one ``voice-message.ogg`` carrying
``duration_secs`` and ``waveform``, served on the fake's CDN), the shared downloader, the real
``openai`` client against the strict speech fake, and the answering pipeline."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import discord  # noqa: F401

from adapters import words
from adapters.voice import Hearing
from core.files import MB
from core.scripted import Turn
from core.speech import OpenAITranscriber
from tests.fakes.discord_server import CHANNEL_ID, Call
from tests.fakes.speech_server import FakeSpeech
from tests.integration.test_discord import content_of
from tests.integration.test_discord_files import CONVERSATION, running

OGG = b"OggS\x00\x02" + bytes(500)


def _posted(call: Call) -> bool:
    return call.method in ("POST", "PATCH") and f"/channels/{CHANNEL_ID}/messages" in call.path


async def test_a_voice_message_in_a_free_response_channel_is_answered_transcript_first() -> None:
    async with FakeSpeech() as speech:
        speech.transcript("How long is the warranty?")
        transcriber = OpenAITranscriber(
            "whisper-1", base_url=speech.base_url, api_key=speech.api_key, price_per_minute=0.006
        )
        hearing = Hearing(transcriber, max_seconds=300, max_bytes=MB)
        turns = [Turn("Thought: known.\nFinal Answer: 36 months.")]
        async with running(turns, hearing=hearing, free_response_channels=(CHANNEL_ID,)) as h:
            payload = h.fake.voice_message_create(OGG, 4.36)
            await h.fake.dispatch("MESSAGE_CREATE", payload)
            await h.fake.wait_for_calls(
                lambda c: _posted(c) and "36 months." in content_of(c), 1, within=10
            )
            trace = await h.traces.last(CONVERSATION)
            final = [
                content_of(c) for c in h.fake.calls if _posted(c) and "36 months." in content_of(c)
            ]
        await transcriber.aclose()
    assert final[-1].startswith("> 🎤 0:04 · How long is the warranty?")
    assert trace is not None and trace.voice is not None
    assert trace.question == "How long is the warranty?"
    assert trace.voice.seconds == 4.36 and trace.voice.model == "whisper-1"
    (upload,) = speech.uploads
    assert upload.filename == "voice-message.ogg" and upload.data == OGG
    speech.assert_complete()


async def test_a_voice_message_over_max_seconds_is_refused_before_the_cdn_is_asked() -> None:
    async with FakeSpeech() as speech:
        transcriber = OpenAITranscriber("whisper-1", base_url=speech.base_url, api_key="k")
        hearing = Hearing(transcriber, max_seconds=60, max_bytes=MB)
        async with running([], hearing=hearing, free_response_channels=(CHANNEL_ID,)) as h:
            await h.fake.dispatch("MESSAGE_CREATE", h.fake.voice_message_create(OGG, 61.2))
            line = words.voice_too_long(61.2, 60)
            await h.fake.wait_for_calls(
                lambda c: _posted(c) and content_of(c) == line, 1, within=10
            )
            assert h.fake.cdn_requests == []
        await transcriber.aclose()
    assert speech.uploads == []
