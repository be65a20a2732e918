"""OpenAIChatModel with the real ``openai`` SDK against the scripted fake, over real HTTP."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

from bot.model_transport import READ_EVERY, AiohttpTransport
from core.errors import (
    ModelAuthError,
    ModelBadRequest,
    ModelError,
    ModelRateLimited,
    ModelTimeout,
    ModelUnavailable,
)
from core.history import Message
from core.llm import ModelChunk, ToolCallDelta, Usage
from core.openai_model import OpenAIChatModel, ThinkSplitter
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall, FakeUsage

KEY = "sk-test-RECOGNISABLE-0123456789abcdef"
STOP = ("\nObservation:",)
MESSAGES: list[Message] = [
    {"role": "system", "content": "You are a ReAct agent."},
    {"role": "user", "content": "What is 2 + 2?"},
]

MakeModel = Callable[..., OpenAIChatModel]


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def _app_transport() -> AiohttpTransport:
    """The transport the app gives the model (``bot.models``)."""
    return AiohttpTransport(read_every=READ_EVERY)


@pytest.fixture(params=["httpx2", "aiohttp"])
async def make_model(fake: FakeOpenAI, request: pytest.FixtureRequest) -> AsyncIterator[MakeModel]:
    """Builds models aimed at the fake (tiny backoff so retries are fast); closes them after.
    Each test runs over httpx2's own transport and over aiohttp's (the app's,
    ``bot.model_transport``): both must behave the same, failures included."""
    models: list[OpenAIChatModel] = []

    def make(**overrides: Any) -> OpenAIChatModel:
        options: dict[str, Any] = {
            "model": "fake-model",
            "base_url": fake.base_url,
            "api_key": KEY,
            "request_timeout": 5.0,
            "backoff": 0.01,
            "transport": _app_transport if request.param == "aiohttp" else None,
        }
        model = OpenAIChatModel(**(options | overrides))
        models.append(model)
        return model

    yield make
    for model in models:
        await model.aclose()


async def collect(model: OpenAIChatModel, *, stop: Sequence[str] = STOP) -> list[ModelChunk]:
    return [chunk async for chunk in model.stream(MESSAGES, stop=stop)]


def text_of(chunks: Sequence[ModelChunk]) -> str:
    return "".join(chunk.text for chunk in chunks)


def reasoning_of(chunks: Sequence[ModelChunk]) -> str:
    return "".join(chunk.reasoning for chunk in chunks)


def notices(chunks: Sequence[ModelChunk]) -> list[str]:
    return [chunk.notice for chunk in chunks if chunk.notice is not None]


def assert_safe(error: BaseException) -> None:
    """The key appears nowhere the user or a log line could see it from our error."""
    for shown in (str(error), repr(error), *map(str, error.args)):
        assert KEY not in shown
        assert "RECOGNISABLE" not in shown


# -- streaming -----------------------------------------------------------------------------


async def test_streams_text_chunk_by_chunk(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.reply(
        "Thought: easy.\nAnswer: 4",
        chunks=["Thought: ", "easy.\n", "Answer: 4"],
        delay=READ_EVERY * 1.5,  # apart by more than the app reads them together
    )

    chunks = await collect(make_model())

    assert [c.text for c in chunks if c.text] == ["Thought: ", "easy.\n", "Answer: 4"]
    body = fake.requests[0]
    assert body["model"] == "fake-model"
    assert body["messages"] == MESSAGES
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.0
    assert fake.request_headers[0]["Authorization"] == f"Bearer {KEY}"
    fake.assert_complete()


async def test_stop_is_sent_and_honoured(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.reply("Thought: look it up\nAction: search\nAction Input: x\nObservation: invented")

    chunks = await collect(make_model())

    assert text_of(chunks) == "Thought: look it up\nAction: search\nAction Input: x"
    assert fake.requests[0]["stop"] == ["\nObservation:"]


async def test_empty_stop_and_no_temperature_are_omitted_extra_body_is_sent(
    fake: FakeOpenAI, make_model: MakeModel
) -> None:
    fake.reply("hi")
    model = make_model(temperature=None, extra_body={"top_k": 20})

    await collect(model, stop=())

    body = fake.requests[0]
    assert "stop" not in body
    assert "temperature" not in body
    assert body["top_k"] == 20


async def test_usage_is_reported_once_at_the_end(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.reply(
        "Answer: 4", usage=FakeUsage(prompt_tokens=40, completion_tokens=5, cached_tokens=32)
    )

    chunks = await collect(make_model())

    usages = [c.usage for c in chunks if c.usage is not None]
    assert usages == [Usage(prompt_tokens=40, completion_tokens=5, cached_tokens=32)]
    assert chunks[-1].usage is not None


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_fields_become_reasoning(
    fake: FakeOpenAI, make_model: MakeModel, field: str
) -> None:
    fake.reply("Answer: 4", reasoning=["Two plus ", "two is four."], reasoning_field=field)

    chunks = await collect(make_model())

    assert reasoning_of(chunks) == "Two plus two is four."
    assert text_of(chunks) == "Answer: 4"


async def test_think_tags_straddling_chunks_become_reasoning(
    fake: FakeOpenAI, make_model: MakeModel
) -> None:
    fake.reply(
        "<think>I should add.</think>Answer: 4",
        chunks=["<thi", "nk>I should ", "add.</th", "ink>Answer", ": 4"],
    )

    chunks = await collect(make_model())

    assert reasoning_of(chunks) == "I should add."
    assert text_of(chunks) == "Answer: 4"
    assert all(not (c.text and c.reasoning) for c in chunks)


async def test_tool_call_deltas_are_passed_through(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.reply(tool_calls=[FakeToolCall("calculator", '{"expression": "2 + 2"}', id="call_7")])
    tools = [{"type": "function", "function": {"name": "calculator", "parameters": {}}}]

    chunks = [c async for c in make_model().stream(MESSAGES, stop=(), tools=tools)]

    deltas: list[ToolCallDelta] = [d for c in chunks for d in c.tool_calls]
    assert deltas[0] == ToolCallDelta(index=0, id="call_7", name="calculator", arguments="")
    assert "".join(d.arguments for d in deltas) == '{"expression": "2 + 2"}'
    assert fake.requests[0]["tools"] == tools


# -- retries -------------------------------------------------------------------------------


async def test_429_with_retry_after_is_retried_with_a_notice(
    fake: FakeOpenAI, make_model: MakeModel
) -> None:
    fake.error(429, "Rate limit reached", retry_after=0.2).reply("Answer: 4")

    started = time.monotonic()
    chunks = await collect(make_model())
    elapsed = time.monotonic() - started

    assert notices(chunks) == ["rate-limited by the provider; retrying in 0.2 s (attempt 2/4)"]
    assert chunks[0].notice is not None  # shown before the wait, not after it
    assert text_of(chunks) == "Answer: 4"
    assert 0.2 <= elapsed < 1.5
    assert len(fake.requests) == 2
    fake.assert_complete()


async def test_retry_after_ms_is_preferred(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.error(429, retry_after_ms=100, retry_after=20).reply("ok")

    chunks = await collect(make_model())

    assert "retrying in 0.1 s" in notices(chunks)[0]
    assert text_of(chunks) == "ok"


async def test_retry_after_beyond_the_cap_fails_at_once(
    fake: FakeOpenAI, make_model: MakeModel
) -> None:
    fake.error(429, "Too many requests", retry_after=120)

    with pytest.raises(ModelRateLimited, match="HTTP 429"):
        await collect(make_model())
    assert len(fake.requests) == 1


async def test_5xx_exhausting_retries_is_unavailable(
    fake: FakeOpenAI, make_model: MakeModel
) -> None:
    for _ in range(3):
        fake.error(503, "The server is overloaded")
    seen: list[ModelChunk] = []

    with pytest.raises(ModelUnavailable, match="HTTP 503") as caught:
        async for chunk in make_model(max_retries=2).stream(MESSAGES, stop=STOP):
            seen.append(chunk)

    assert [n.split(";")[0] for n in notices(seen)] == [
        "the model provider is unavailable (HTTP 503)"
    ] * 2
    assert "(attempt 3/3)" in notices(seen)[-1]
    assert "overloaded" in str(caught.value)
    fake.assert_complete()


async def test_connection_refused_is_retried_then_unavailable(make_model: MakeModel) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = make_model(base_url=f"http://127.0.0.1:{port}/v1", max_retries=1)
    seen: list[ModelChunk] = []

    with pytest.raises(ModelUnavailable, match="Could not reach"):
        async for chunk in model.stream(MESSAGES, stop=STOP):
            seen.append(chunk)
    assert len(notices(seen)) == 1


# -- errors that are final -----------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_errors_never_show_the_key(
    fake: FakeOpenAI, make_model: MakeModel, status: int
) -> None:
    # OpenAI echoes (part of) the key back on 401; a careless proxy might echo all of it.
    fake.error(status, f"Incorrect API key provided: {KEY}. Find your key at ...")
    model = make_model()

    with pytest.raises(ModelAuthError) as caught:
        await collect(model)

    assert f"HTTP {status}" in str(caught.value)
    assert "Incorrect API key provided" in str(caught.value)
    assert_safe(caught.value)
    assert KEY not in repr(model)
    assert len(fake.requests) == 1


@pytest.mark.parametrize("status", [400, 404, 422])
async def test_client_errors_are_bad_requests_with_a_trimmed_message(
    fake: FakeOpenAI, make_model: MakeModel, status: int
) -> None:
    fake.error(status, "This model's maximum context length is 8192 tokens. " + "x" * 2000)

    with pytest.raises(ModelBadRequest) as caught:
        await collect(make_model())

    message = str(caught.value)
    assert f"HTTP {status}" in message
    assert "maximum context length is 8192 tokens" in message
    assert len(message) < 400
    assert len(fake.requests) == 1


async def test_a_proxy_html_page_is_not_shown_to_the_user(
    fake: FakeOpenAI, make_model: MakeModel
) -> None:
    fake.error(502, raw_body="<html><body><h1>502 Bad Gateway</h1></body></html>")

    with pytest.raises(ModelUnavailable) as caught:
        await collect(make_model(max_retries=0))

    host = fake.base_url.split("/")[2]
    assert str(caught.value) == f"The model provider at {host} is unavailable (HTTP 502)."


async def test_every_error_message_is_free_of_the_key(
    fake: FakeOpenAI, make_model: MakeModel
) -> None:
    for status in (400, 401, 403, 404, 422, 429, 500):
        fake.error(status, f"bad key {KEY} / Bearer {KEY}", retry_after=999)
    model = make_model(max_retries=0)

    for _ in range(7):
        with pytest.raises(ModelError) as caught:
            await collect(model)
        assert_safe(caught.value)
    fake.assert_complete()


# -- stalls, timeouts, drops ---------------------------------------------------------------


async def test_a_stalled_stream_is_detectable_by_the_caller(
    fake: FakeOpenAI, make_model: MakeModel
) -> None:
    # The agent loop guards each ``__anext__`` with its own stall timeout, like this.
    fake.reply("Thought: hmm and then silence", stall_after=1)
    stream = make_model().stream(MESSAGES, stop=STOP)
    seen: list[ModelChunk] = [await anext(stream)]  # the one chunk sent, however slowly

    with pytest.raises(TimeoutError):
        while True:
            async with asyncio.timeout(0.3):
                seen.append(await anext(stream))

    assert text_of(seen) == "Thought: "
    await stream.aclose()


async def test_read_timeout_fires_mid_stream(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.reply("Thought: hmm and then silence", stall_after=1)
    # long enough for the first chunk on a loaded machine; the stall after it is endless
    model = make_model(request_timeout=1.5)
    seen: list[ModelChunk] = []

    with pytest.raises(ModelTimeout, match=r"1\.5 s"):
        async for chunk in model.stream(MESSAGES, stop=STOP):
            seen.append(chunk)
    assert text_of(seen) == "Thought: "
    assert len(fake.requests) == 1  # text was already shown: a retry would duplicate it


async def test_read_timeout_before_the_first_chunk_is_retried(
    fake: FakeOpenAI, make_model: MakeModel
) -> None:
    fake.reply("never sent", stall_after=0).reply("Answer: 4")
    model = make_model(request_timeout=1.0)  # the retry's reply must beat it on a loaded machine

    chunks = await collect(model)

    host = fake.base_url.split("/")[2]
    assert notices(chunks)[0].startswith(f"the model provider at {host} timed out; retrying")
    assert text_of(chunks) == "Answer: 4"


async def test_connection_dropped_mid_stream_is_unavailable(
    fake: FakeOpenAI, make_model: MakeModel
) -> None:
    fake.drop("Thought: I was saying", chunks=["Thought: ", "I was saying"])
    seen: list[ModelChunk] = []

    with pytest.raises(ModelUnavailable, match="dropped in the middle"):
        async for chunk in make_model().stream(MESSAGES, stop=STOP):
            seen.append(chunk)
    assert text_of(seen) == "Thought: I was saying"
    assert len(fake.requests) == 1


async def test_an_error_event_inside_the_stream_is_unavailable(
    fake: FakeOpenAI, make_model: MakeModel
) -> None:
    fake.stream_error("Upstream provider crashed", "Thought: ")
    seen: list[ModelChunk] = []

    with pytest.raises(ModelUnavailable, match="Upstream provider crashed") as caught:
        async for chunk in make_model().stream(MESSAGES, stop=STOP):
            seen.append(chunk)
    host = fake.base_url.split("/")[2]
    assert str(caught.value) == (
        f"The model provider at {host} reported an error: Upstream provider crashed."
    )
    assert text_of(seen) == "Thought: "
    assert len(fake.requests) == 1


async def test_an_error_event_before_any_text_is_not_retried(
    fake: FakeOpenAI, make_model: MakeModel
) -> None:
    # The provider chose to report it in-band; retrying blindly could repeat a costly failure.
    fake.stream_error("Content policy violation")

    with pytest.raises(ModelUnavailable, match="Content policy"):
        await collect(make_model())
    assert len(fake.requests) == 1


# -- provider quirks -----------------------------------------------------------------------


async def test_stream_options_rejected_falls_back_once_and_remembers(
    fake: FakeOpenAI, make_model: MakeModel
) -> None:
    fake.error(400, "Unrecognized request argument supplied: stream_options")
    fake.reply("first").reply("second")
    model = make_model()

    first = await collect(model)
    second = await collect(model)

    assert (text_of(first), text_of(second)) == ("first", "second")
    assert not notices(first)
    assert "stream_options" in fake.requests[0]
    assert "stream_options" not in fake.requests[1]
    assert "stream_options" not in fake.requests[2]
    fake.assert_complete()


async def test_max_tokens_is_sent_and_renamed_once_for_models_that_refuse_it(
    make_model: MakeModel,
) -> None:
    async with FakeOpenAI(unsupported=("max_tokens",)) as reasoning:
        reasoning.reply("first").reply("second")
        model = make_model(base_url=reasoning.base_url, max_tokens=2048)
        assert text_of(await collect(model)) == "first"
        assert text_of(await collect(model)) == "second"
        sent = reasoning.requests
        assert sent[0]["max_tokens"] == 2048  # refused with 400 unsupported_parameter
        assert "max_tokens" not in sent[1] and sent[1]["max_completion_tokens"] == 2048
        assert "max_tokens" not in sent[2]  # remembered: no second refusal
        reasoning.assert_complete()


async def test_a_refused_max_tokens_without_a_hint_is_a_clear_error(
    fake: FakeOpenAI, make_model: MakeModel
) -> None:
    fake.error(400, "max_tokens is too large: 999999. This model supports at most 4096.")
    with pytest.raises(ModelBadRequest, match="at most 4096"):
        await collect(make_model(max_tokens=999999))
    assert len(fake.requests) == 1


async def test_no_key_sends_a_placeholder_for_local_servers(
    fake: FakeOpenAI, make_model: MakeModel
) -> None:
    fake.reply("hi")

    chunks = await collect(make_model(api_key=None))

    assert text_of(chunks) == "hi"
    assert fake.request_headers[0]["Authorization"] == "Bearer not-needed"


async def test_constructor_does_no_io_and_aclose_is_idempotent() -> None:
    model = OpenAIChatModel(model="m", base_url="http://127.0.0.1:9/v1", api_key=None)
    assert model.name == "m"
    await model.aclose()
    await model.aclose()


def test_negative_max_retries_is_refused() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        OpenAIChatModel(model="m", base_url=None, api_key=None, max_retries=-1)


async def test_abandoning_a_stream_early_releases_it(
    fake: FakeOpenAI, make_model: MakeModel
) -> None:
    fake.reply("one two three four", chunks=1).reply("again")
    model = make_model()

    stream = model.stream(MESSAGES, stop=STOP)
    assert (await anext(stream)).text == "o"
    await stream.aclose()

    assert text_of(await collect(model)) == "again"


# -- the think splitter, at every boundary -------------------------------------------------

TRANSCRIPT = "a<b <think>x < y</think>Answer: <thin>4</think>"


@pytest.mark.parametrize("cut", range(1, len(TRANSCRIPT)))
def test_think_splitter_at_every_boundary(cut: int) -> None:
    splitter = ThinkSplitter()
    chunks = splitter.feed(TRANSCRIPT[:cut]) + splitter.feed(TRANSCRIPT[cut:]) + splitter.close()

    assert text_of(chunks) == "a<b Answer: <thin>4</think>"
    assert reasoning_of(chunks) == "x < y"


def test_think_splitter_keeps_an_unterminated_think_as_reasoning() -> None:
    splitter = ThinkSplitter()
    chunks = splitter.feed("<think>still thinking <") + splitter.close()
    assert reasoning_of(chunks) == "still thinking <"
    assert text_of(chunks) == ""
