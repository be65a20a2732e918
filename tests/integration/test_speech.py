"""Speech to text through the real ``openai`` client against the strict local speech fake."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from core.speech import OpenAITranscriber, SpeechError
from tests.fakes.speech_server import LIMIT, FakeSpeech

OGG = b"OggS\x00\x02" + bytes(200)

_open: list[OpenAITranscriber] = []


@pytest.fixture(autouse=True)
async def _closed() -> AsyncIterator[None]:
    yield
    while _open:
        await _open.pop().aclose()


def transcriber(fake: FakeSpeech, model: str = "whisper-1", **kw: object) -> OpenAITranscriber:
    t = OpenAITranscriber(
        model, base_url=fake.base_url, api_key=kw.pop("api_key", fake.api_key), **kw
    )  # type: ignore[arg-type]
    _open.append(t)
    return t


async def test_a_voice_note_is_uploaded_as_multipart_and_heard() -> None:
    async with FakeSpeech() as fake:
        fake.transcript("What is the capital of France?", seconds=4.2)
        heard = await transcriber(fake, price_per_minute=0.006).transcribe(
            "voice.oga", OGG, content_type="audio/ogg", seconds=4.0
        )
        fake.assert_complete()
    assert heard.text == "What is the capital of France?"
    assert heard.seconds == 4.0  # the platform's word first
    assert heard.model == "whisper-1"
    assert heard.cost_usd == pytest.approx(0.006 * 4 / 60)
    upload = fake.uploads[0]
    assert (upload.model, upload.filename, upload.content_type) == (
        "whisper-1",
        "voice.oga",
        "audio/ogg",
    )
    assert upload.data == OGG
    assert upload.fields["response_format"] == "json"


async def test_the_endpoints_length_counts_when_the_platform_gave_none() -> None:
    async with FakeSpeech() as fake:
        fake.transcript("hello there", seconds=61.0)
        heard = await transcriber(fake, price_per_minute=0.006).transcribe(
            "a.ogg", OGG, content_type=None, seconds=None
        )
    assert heard.seconds == 61.0
    assert heard.cost_usd == pytest.approx(0.0061)


async def test_without_a_price_a_note_has_no_cost() -> None:
    async with FakeSpeech() as fake:
        fake.transcript("hi")
        heard = await transcriber(fake).transcribe("a.ogg", OGG, content_type=None, seconds=3)
    assert heard.cost_usd is None


@pytest.mark.parametrize(
    ("name", "data", "kind"),
    [
        ("voice.aac", OGG, "format"),  # an extension OpenAI does not take
        ("voice.ogg", b"not audio at all", "format"),  # the right name, the wrong bytes
    ],
)
async def test_a_file_the_endpoint_refuses_is_a_format_error(
    name: str, data: bytes, kind: str
) -> None:
    async with FakeSpeech() as fake:
        with pytest.raises(SpeechError) as caught:
            await transcriber(fake).transcribe(name, data, content_type=None, seconds=1)
    assert caught.value.kind == kind
    assert fake.refused == [400]


async def test_a_wrong_key_is_an_auth_error_and_never_retried() -> None:
    async with FakeSpeech(api_key="sk-right") as fake:
        t = transcriber(fake, api_key="sk-wrong")
        with pytest.raises(SpeechError) as caught:
            await t.transcribe("a.ogg", OGG, content_type=None, seconds=1)
    assert caught.value.kind == "auth"
    assert fake.refused == [401]
    assert "sk-wrong" not in str(caught.value)


async def test_over_25_mb_is_refused_by_the_endpoint_with_413() -> None:
    async with FakeSpeech() as fake:
        with pytest.raises(SpeechError) as caught:
            await transcriber(fake, max_retries=0).transcribe(
                "a.ogg", b"OggS" + bytes(LIMIT), content_type=None, seconds=1
            )
    assert caught.value.kind == "too_big"
    assert fake.refused == [413]


async def test_a_429_is_retried_after_its_retry_after() -> None:
    async with FakeSpeech() as fake:
        fake.error(429, "Rate limit reached", retry_after=0.01).transcript("second time lucky")
        heard = await transcriber(fake, max_retries=1).transcribe(
            "a.ogg", OGG, content_type=None, seconds=1
        )
        fake.assert_complete()
    assert heard.text == "second time lucky"
    assert len(fake.uploads) == 2


async def test_a_429_that_outlasts_the_retries_is_busy() -> None:
    async with FakeSpeech() as fake:
        fake.error(429, retry_after=0.01).error(429, retry_after=0.01)
        with pytest.raises(SpeechError) as caught:
            await transcriber(fake, max_retries=1).transcribe(
                "a.ogg", OGG, content_type=None, seconds=1
            )
        fake.assert_complete()
    assert caught.value.kind == "busy"


async def test_a_dead_endpoint_is_down() -> None:
    async with FakeSpeech() as fake:
        url = fake.base_url
    t = OpenAITranscriber("whisper-1", base_url=url, api_key="k", max_retries=0)
    _open.append(t)
    with pytest.raises(SpeechError) as caught:
        await t.transcribe("a.ogg", OGG, content_type=None, seconds=1)
    assert caught.value.kind == "down"


async def test_verbose_json_is_refused_for_gpt_4o_transcribe_as_openai_does() -> None:
    """The fake is strict about formats: the client asks for ``json``, which every model
    takes; a client that asked gpt-4o-transcribe for verbose_json would get 400."""
    async with FakeSpeech() as fake:
        fake.transcript("fine")
        t = transcriber(fake, "gpt-4o-transcribe")
        heard = await t.transcribe("a.ogg", OGG, content_type=None, seconds=1)
        assert heard.text == "fine"
        import openai

        client = openai.AsyncOpenAI(base_url=fake.base_url, api_key=fake.api_key, max_retries=0)
        with pytest.raises(openai.BadRequestError):
            await client.audio.transcriptions.create(
                model="gpt-4o-transcribe", file=("a.ogg", OGG), response_format="verbose_json"
            )
        await client.close()
