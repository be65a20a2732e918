"""Slack audio clips, end to end: the real bolt app and slack_sdk client against the strict
Slack fake (a clip is a file of ``subtype`` ``slack_audio`` with its ``duration_ms``, its
``url_private`` served to the bot token only), the shared downloader, the real ``openai``
client against the strict speech fake, and the answering pipeline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapters import words
from adapters.voice import Hearing
from core.files import MB
from core.scripted import Turn
from core.speech import OpenAITranscriber
from tests.fakes.slack_server import message_text
from tests.fakes.speech_server import FakeSpeech
from tests.integration import test_slack_files
from tests.integration.test_slack_app import CHANNEL
from tests.integration.test_slack_files import mention

served = test_slack_files.served
"""The Slack harness fixture (the real bolt app, the bot, the strict fake, file workers)."""

WEBM = b"\x1a\x45\xdf\xa3" + bytes(600)


async def test_an_audio_clip_mention_is_answered_with_the_transcript_as_the_question(
    served: Callable[..., Any],
) -> None:
    async with FakeSpeech() as speech:
        speech.transcript("What is 17 times 23?")
        transcriber = OpenAITranscriber(
            "whisper-1", base_url=speech.base_url, api_key=speech.api_key, price_per_minute=0.006
        )
        hearing = Hearing(transcriber, max_seconds=300, max_bytes=MB)
        h, traces, _ = await served([Turn("Thought: known.\nFinal Answer: 391.")], hearing=hearing)
        clip = h.fake.add_file("audio_message.webm", WEBM, mimetype="audio/webm", clip_ms=3400)
        status, _, _ = await h.event(mention("", [clip]), event_id="EvV1")
        assert status == 200
        await h.settled()
        trace = await traces.last(f"slack:T0TEAM:{CHANNEL}:{h.root().ts}")
        await transcriber.aclose()
    assert trace is not None and trace.answer == "391."
    assert trace.voice is not None and trace.voice.seconds == 3.4
    assert "asked:* 🎤 0:03 · What is 17 times 23?" in message_text(h.root())
    (upload,) = speech.uploads
    assert upload.data == WEBM and upload.filename == "audio_message.webm"
    assert [auth for _, auth in h.fake.file_requests] == ["Bearer xoxb-test"]
    speech.assert_complete()


async def test_a_clip_over_max_seconds_is_refused_before_it_is_downloaded(
    served: Callable[..., Any],
) -> None:
    async with FakeSpeech() as speech:
        transcriber = OpenAITranscriber("whisper-1", base_url=speech.base_url, api_key="k")
        h, _, _ = await served([], hearing=Hearing(transcriber, max_seconds=60, max_bytes=MB))
        clip = h.fake.add_file("audio_message.webm", WEBM, mimetype="audio/webm", clip_ms=90_000)
        await h.event(mention("", [clip]), event_id="EvV2")
        await h.settled()
        await transcriber.aclose()
    said = [str(c.args.get("text")) for c in h.fake.records if c.method == "chat.postEphemeral"]
    assert said == [words.voice_too_long(90, 60)]
    assert h.fake.file_requests == [] and speech.uploads == []
