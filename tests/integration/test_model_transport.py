"""``bot.model_transport.AiohttpTransport`` under the SDK's ``httpx2`` client, over real HTTP
from the OpenAI fake: what it adds to the plain transport (reads gathered, connections kept).
Everything else it must do as httpx2's own transport does is checked by running the model's
tests over both (``test_openai_model.py``, ``test_openai_streams.py``)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import httpx2
import pytest

from bot.model_transport import AiohttpTransport
from core.errors import ModelTimeout
from core.openai_model import OpenAIChatModel
from tests.fakes.openai_server import FakeOpenAI

WORDS = [f"w{i} " for i in range(30)]


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


async def _reads(fake: FakeOpenAI, transport: AiohttpTransport) -> tuple[list[bytes], float]:
    async with httpx2.AsyncClient(transport=transport) as client:
        started = time.monotonic()
        request = client.build_request(
            "POST",
            f"{fake.base_url}/chat/completions",
            json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
        )
        response = await client.send(request, stream=True)
        reads = [piece async for piece in response.aiter_raw()]
        await response.aclose()
        return reads, time.monotonic() - started


async def test_reads_are_gathered_at_most_every_read_every(fake: FakeOpenAI) -> None:
    """30 chunks 10 ms apart: read every 0.1 s, they come a few at a time, and all of them."""
    fake.reply("".join(WORDS), chunks=WORDS, delay=0.01)
    reads, elapsed = await _reads(fake, AiohttpTransport(read_every=0.1))
    body = b"".join(reads).decode()
    assert all(word.strip() in body for word in WORDS) and "[DONE]" in body
    # the first read at once, then one per 0.1 s at most (and the end's, if apart)
    assert len(reads) <= elapsed / 0.1 + 2
    fake.assert_complete()


async def test_without_read_every_each_chunk_is_read_as_it_comes(fake: FakeOpenAI) -> None:
    """The bound above can fail: read as they come, 30 chunks 10 ms apart are many reads."""
    fake.reply("".join(WORDS), chunks=WORDS, delay=0.01)
    reads, elapsed = await _reads(fake, AiohttpTransport())
    assert len(reads) > elapsed / 0.1 + 2


async def test_a_finished_reply_leaves_its_connection_for_the_next(fake: FakeOpenAI) -> None:
    """Read to ``[DONE]`` and its end, with reads gathered, the connection is used again:
    a model call per step must not open a connection per step."""
    model = OpenAIChatModel(
        model="m",
        base_url=fake.base_url,
        api_key="k",
        transport=lambda: AiohttpTransport(read_every=0.1),
    )
    try:
        for _ in range(3):
            fake.reply("one two three", delay=0.01)
            pieces = [p async for p in model.stream([{"role": "user", "content": "q"}], stop=())]
            assert "".join(p.text for p in pieces) == "one two three"
    finally:
        await model.aclose()
    assert len(fake.request_peers) == 3 and len(set(fake.request_peers)) == 1


async def test_a_body_silent_for_the_read_timeout_fails_after_it(fake: FakeOpenAI) -> None:
    """The body's read timeout is the transport's own watch (aiohttp's moves a timer on
    every packet): chunks that came apart from the headers, then silence, fail as a
    timeout no sooner than the read timeout and within 1.25 times it (and some slack)."""
    fake.reply("a b c d e f g h", delay=0.05, stall_after=4)
    model = OpenAIChatModel(
        model="m",
        base_url=fake.base_url,
        api_key="k",
        request_timeout=1.0,
        transport=lambda: AiohttpTransport(read_every=0.1),
    )
    seen: list[str] = []
    try:
        with pytest.raises(ModelTimeout, match=r"1 s"):
            async for piece in model.stream([{"role": "user", "content": "q"}], stop=()):
                seen.append(piece.text)
                started = time.monotonic()
    finally:
        await model.aclose()
    silent = time.monotonic() - started
    assert "".join(seen) == "a b c d "
    assert 0.9 <= silent < 1.25 + 1.0


@pytest.mark.parametrize("transport", [None, "aiohttp"])
async def test_a_base_url_with_credentials_reaches_the_provider_as_httpx2s_own_does(
    fake: FakeOpenAI, transport: str | None
) -> None:
    """``http://user:pass@host/v1`` (a proxy's credentials in a base URL): aiohttp refuses a
    URL with credentials beside an Authorization header, so the transport sends the URL
    without them, as httpx2's own transport does, and the request is answered."""
    base = fake.base_url.replace("http://", "http://user:pass@")
    model = OpenAIChatModel(
        model="m",
        base_url=base,
        api_key="k",
        transport=(lambda: AiohttpTransport(read_every=0.1)) if transport else None,
    )
    try:
        fake.reply("one two")
        pieces = [p async for p in model.stream([{"role": "user", "content": "q"}], stop=())]
        assert "".join(p.text for p in pieces) == "one two"
    finally:
        await model.aclose()
    sent = {name.lower(): value for name, value in fake.request_headers[-1].items()}
    # httpx2's client turns the URL's credentials into Basic auth before any transport
    assert sent["authorization"] == "Basic dXNlcjpwYXNz", "user:pass, on either transport"
