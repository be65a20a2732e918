"""``OpenAIChatModel`` reading providers' streams byte for byte, over real HTTP from the fake.

Each transcript is a stream in one provider's shape (OpenAI, DeepSeek, OpenRouter, vLLM,
Ollama), with the comments, line ends and fields that provider sends; each is served whole,
then one byte per write, so every line, CRLF and event is cut somewhere.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from bot.model_transport import READ_EVERY, AiohttpTransport
from core.errors import ModelUnavailable
from core.history import Message
from core.llm import ModelChunk
from core.openai_model import OpenAIChatModel
from tests.fakes.openai_server import FakeOpenAI

MESSAGES: list[Message] = [{"role": "user", "content": "What is 2 + 2?"}]


def sse(*chunks: Any, eol: str = "\n", done: bool = True, extra: str = "") -> bytes:
    events = [f"data: {json.dumps(chunk)}{eol}{eol}" for chunk in chunks]
    return (extra + "".join(events) + (f"data: [DONE]{eol}{eol}" if done else "")).encode()


def chunk(delta: dict[str, Any], *, finish: str | None = None, **top: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [choice],
        **top,
    }


OPENAI_REFUSAL = sse(
    chunk({"role": "assistant", "content": None, "refusal": ""}, usage=None),
    chunk({"refusal": "I can't help"}, usage=None),
    chunk({"refusal": " with that."}, usage=None),
    chunk({}, finish="stop", usage=None),
    {
        "id": "chatcmpl-1",
        "choices": [],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 8},
        },
    },
    eol="\r\n",
)
DEEPSEEK_REASONER = sse(
    chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
    chunk({"content": None, "reasoning_content": "Two and two"}),
    chunk({"content": None, "reasoning_content": " make four."}),
    chunk({"content": "4", "reasoning_content": None}),
    chunk(
        {"content": "", "reasoning_content": None},
        finish="stop",
        usage={"prompt_tokens": 10, "completion_tokens": 7, "prompt_cache_hit_tokens": 6},
    ),
    extra=": keep-alive\n\n",
)
PARALLEL_CALLS = sse(
    chunk({"role": "assistant", "content": None}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "calculate", "arguments": ""},
                }
            ]
        }
    ),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"expre'}}]}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 1,
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"q'},
                }
            ]
        }
    ),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ssion": "2+2"}'}}]}),
    chunk({"tool_calls": [{"index": 1, "function": {"arguments": '": "ünï"}'}}]}),
    chunk({}, finish="tool_calls"),
)
OPENROUTER_REASONING = sse(
    chunk({"role": "assistant", "content": "", "reasoning": "Think"}),
    chunk({"content": "Four", "reasoning": None}),
    chunk({"content": "."}, finish="stop"),
    extra=": OPENROUTER PROCESSING\n\n: OPENROUTER PROCESSING\n\n",
)
OLLAMA_NO_USAGE = sse(
    chunk({"role": "assistant", "content": "<think>count</think>"}),
    chunk({"content": "Four"}),
    chunk({"content": ""}, finish="stop"),
)

TRANSCRIPTS = {
    "openai-refusal-crlf": (OPENAI_REFUSAL, "", "", "I can't help with that.", (12, 5, 8)),
    "deepseek-reasoner": (DEEPSEEK_REASONER, "4", "Two and two make four.", "", (10, 7, 6)),
    "openrouter-reasoning": (OPENROUTER_REASONING, "Four.", "Think", "", None),
    "ollama-think-tags": (OLLAMA_NO_USAGE, "Four", "count", "", None),
}


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


Collect = Callable[[FakeOpenAI], Awaitable[list[ModelChunk]]]


def _app_transport() -> AiohttpTransport:
    """The transport the app gives the model (``bot.models``)."""
    return AiohttpTransport(read_every=READ_EVERY)


@pytest.fixture(params=["httpx2", "aiohttp"])
def collect(request: pytest.FixtureRequest) -> Collect:
    """Reads the fake's reply through httpx2's own transport, and through aiohttp's (the
    app's, ``bot.model_transport``): every stream must read the same through both."""
    transport = _app_transport if request.param == "aiohttp" else None

    async def run(fake: FakeOpenAI) -> list[ModelChunk]:
        model = OpenAIChatModel(
            model="m",
            base_url=fake.base_url,
            api_key="k",
            max_retries=0,
            request_timeout=600,
            transport=transport,
        )
        try:
            return [piece async for piece in model.stream(MESSAGES, stop=())]
        finally:
            await model.aclose()

    return run


@pytest.mark.parametrize("size", [None, 1])
@pytest.mark.parametrize("name", TRANSCRIPTS)
async def test_a_provider_transcript_whole_and_byte_by_byte(
    fake: FakeOpenAI, collect: Collect, name: str, size: int | None
) -> None:
    body, text, reasoning, refusal, usage = TRANSCRIPTS[name]
    fake.raw(body, size=size)
    pieces = await collect(fake)
    assert "".join(p.text for p in pieces) == text
    assert "".join(p.reasoning for p in pieces) == reasoning
    assert "".join(p.refusal for p in pieces) == refusal
    counted = [p.usage for p in pieces if p.usage is not None]
    if usage is None:
        assert counted == []
    else:
        assert [(u.prompt_tokens, u.completion_tokens, u.cached_tokens) for u in counted] == [usage]
    assert [p.finish for p in pieces if p.finish] == ["stop"]
    fake.assert_complete()


@pytest.mark.parametrize("size", [None, 1])
async def test_parallel_tool_calls_split_mid_token(
    fake: FakeOpenAI, collect: Collect, size: int | None
) -> None:
    fake.raw(PARALLEL_CALLS, size=size)
    calls = [call for piece in await collect(fake) for call in piece.tool_calls]
    by_index: dict[int, str] = {}
    for call in calls:
        by_index[call.index] = by_index.get(call.index, "") + call.arguments
    assert {call.index: call.name for call in calls if call.name} == {0: "calculate", 1: "search"}
    assert json.loads(by_index[0]) == {"expression": "2+2"}
    assert json.loads(by_index[1]) == {"q": "ünï"}


async def test_an_error_event_mid_stream_is_unavailable_with_the_providers_words(
    fake: FakeOpenAI,
    collect: Collect,
) -> None:
    """``event: error`` with the error's own object (no ``error`` key around it)."""
    fake.raw(
        sse(chunk({"content": "Partial"}), done=False)
        + b'event: error\ndata: {"message": "Overloaded, try later", "type": "overloaded"}\n\n'
    )
    with pytest.raises(ModelUnavailable, match="Overloaded, try later"):
        await collect(fake)


async def test_an_error_event_in_plain_words_is_unavailable_with_them(
    fake: FakeOpenAI, collect: Collect
) -> None:
    fake.raw(b"event: error\ndata: upstream went away\n\n")
    with pytest.raises(ModelUnavailable, match="upstream went away"):
        await collect(fake)


async def test_an_error_object_in_the_data_is_unavailable(
    fake: FakeOpenAI, collect: Collect
) -> None:
    fake.raw(
        sse(chunk({"content": "Hi"}), {"error": {"message": "Rate limit upstream", "code": 502}})
    )
    with pytest.raises(ModelUnavailable, match="Rate limit upstream"):
        await collect(fake)


async def test_fields_of_the_wrong_type_count_as_absent(fake: FakeOpenAI, collect: Collect) -> None:
    """A hostile or broken server: text where a number goes and the other way round."""
    fake.raw(
        sse(
            chunk({"content": 5}),
            chunk({"content": "ok", "tool_calls": "no"}),
            chunk({"content": ["x"], "reasoning_content": 7}, finish=3),
            {"choices": [None], "usage": "lots"},
            chunk({"content": "!"}, finish="stop"),
        )
    )
    pieces = await collect(fake)
    assert "".join(p.text for p in pieces) == "ok!"
    assert [p.usage for p in pieces if p.usage] == []


@pytest.mark.parametrize(
    "body",
    [
        b"data: {not json}\n\n",
        b"data: [1, 2]\n\n",
        b"data: 5\n\n",
        b"data: null\n\n",
        b"data: " + b"[" * 100_000 + b"\n\n",
    ],
)
async def test_data_that_is_no_chunk_is_a_malformed_stream(
    fake: FakeOpenAI, collect: Collect, body: bytes
) -> None:
    fake.raw(body)
    with pytest.raises(ModelUnavailable, match="malformed stream"):
        await collect(fake)


async def test_a_stream_that_stays_open_after_done_ends_at_done(
    fake: FakeOpenAI, collect: Collect
) -> None:
    """``[DONE]`` ends the reply: what follows is read for a moment (so the connection can be
    used again), never waited for until the read timeout."""
    fake.raw(sse(chunk({"content": "Four"}, finish="stop")), hold=True)
    pieces = await collect(fake)
    assert "".join(p.text for p in pieces) == "Four"


async def test_the_request_is_json_with_the_key_as_the_sdk_sends_it(
    fake: FakeOpenAI, collect: Collect
) -> None:
    fake.raw(sse(chunk({"content": "ok"}, finish="stop")))
    await collect(fake)
    headers = {k.lower(): v for k, v in fake.request_headers[0].items()}
    assert headers["content-type"] == "application/json"
    assert headers["authorization"] == "Bearer k"
    assert fake.requests[0]["messages"] == MESSAGES and fake.requests[0]["stream"] is True
