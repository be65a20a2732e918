"""``core.sse.SSEDecoder`` against a plain reading of the spec, whatever the bytes and wherever
the stream is cut; ``core.openai_reply.Reply`` on whatever JSON a provider sends."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx2
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.llm import ModelChunk, ToolCallDelta
from core.openai_model import ReplyReader
from core.openai_reply import MalformedChunk, Reply, parse_json
from core.sse import ServerSentEvent, SSEDecoder
from tests.properties import property_settings


def spec_events(stream: bytes) -> list[ServerSentEvent]:
    """The spec's event-stream interpretation, written plainly over the whole stream at once."""
    text = stream.decode("utf-8", "replace").removeprefix("\ufeff")
    *lines, _unfinished = re.split(r"\r\n|\r|\n", text)
    events: list[ServerSentEvent] = []
    data: list[str] = []
    name = ""
    for line in lines:
        if line == "":
            if data:
                events.append((name, "\n".join(data)))
            data, name = [], ""
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
    return events


def decoded(pieces: list[bytes]) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events = [event for piece in pieces for event in decoder.feed(piece)]
    return events + decoder.close()


EOL = st.sampled_from([b"\n", b"\r\n", b"\r"])
VALUE = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12
).map(str.encode)  # no lone surrogates: a provider sends UTF-8, which cannot hold them
LINE = st.one_of(
    st.tuples(st.sampled_from([b"data:", b"data: ", b"data"]), VALUE),
    st.tuples(
        st.sampled_from([b"event:", b"event: ", b":", b": comment", b"id: ", b"retry:"]), VALUE
    ),
    st.tuples(st.just(b""), VALUE),  # a field name of its own (ignored), or junk
    st.tuples(st.just(b""), st.just(b"")),  # a blank line: the end of an event
    st.tuples(
        st.just(b""), st.binary(max_size=6).filter(lambda b: b"\r" not in b and b"\n" not in b)
    ),
)


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(st.tuples(LINE, EOL), max_size=25))
    body = b"".join(head + value + eol for (head, value), eol in lines)
    return (b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + body


@property_settings(300, ci=25)
@given(streams())
def test_cut_at_every_boundary_gives_the_spec_events(stream: bytes) -> None:
    expected = spec_events(stream)
    assert decoded([stream]) == expected
    for cut in range(len(stream) + 1):
        assert decoded([stream[:cut], stream[cut:]]) == expected, cut


@property_settings(300, ci=25)
@given(streams(), st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_cut_anywhere_any_number_of_times(stream: bytes, cuts: list[int]) -> None:
    points = sorted({min(cut, len(stream)) for cut in cuts})
    pieces = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    assert decoded(pieces) == spec_events(stream)


@property_settings(300, ci=25)
@given(
    st.lists(
        st.one_of(
            st.tuples(LINE, EOL).map(lambda pair: pair[0][0] + pair[0][1] + pair[1]),
            VALUE.map(lambda v: b"data: " + v + b"\n\n"),
            VALUE.map(lambda v: b"data:" + v + b"\n\n"),
        ),
        max_size=20,
    )
)
def test_one_event_per_piece_as_providers_write_them(pieces: list[bytes]) -> None:
    """Whole ``data:`` events in pieces of their own take the decoder's short path; mixed
    with lines of every kind they still read as the spec says."""
    pieces = [b": hello\n\n", *pieces]
    assert decoded(pieces) == spec_events(b"".join(pieces))


def test_one_byte_at_a_time_across_crlf_comments_and_multiline_data() -> None:
    stream = (
        b": OPENROUTER PROCESSING\r\n\r\n"
        b'data: {"a":\r\ndata: 1}\r\n\r\n'
        b"event: error\rdata: gone\r\r"
        b"data:[DONE]\n\n"
        b"data: cut short\n"
    )
    expected = [("", '{"a":\n1}'), ("error", "gone"), ("", "[DONE]")]
    assert decoded([stream[i : i + 1] for i in range(len(stream))]) == expected
    assert decoded([stream]) == expected


def test_a_huge_line_in_tiny_pieces_is_joined_once() -> None:
    data = b"x" * 200_000
    pieces = [b"data: ", *(data[i : i + 7] for i in range(0, len(data), 7)), b"\n\n"]
    assert decoded(pieces) == [("", data.decode())]


# ---- Reply: provider chunks -----------------------------------------------------------


def replied(chunks: list[Any]) -> list[ModelChunk]:
    reply = Reply()
    return [piece for chunk in chunks for piece in reply.translate(chunk)] + reply.close()


def test_text_reasoning_refusal_calls_finish_and_usage() -> None:
    pieces = replied(
        [
            {
                "id": "r1",
                "model": "m-1",
                "choices": [{"delta": {"role": "assistant", "content": ""}}],
            },
            {"choices": [{"delta": {"reasoning_content": "hm", "content": None}}]},
            {"choices": [{"delta": {"content": "Hi <thi"}}]},
            {"choices": [{"delta": {"content": "nk>why</think> there"}}]},
            {"choices": [{"delta": {"refusal": "no"}}]},
            {
                "choices": [
                    {
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 1,
                                    "id": "c",
                                    "function": {"name": "f", "arguments": '{"a'},
                                }
                            ]
                        }
                    }
                ]
            },
            {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
            {
                "choices": [],
                "usage": {"prompt_tokens": 9, "completion_tokens": 3, "prompt_cache_hit_tokens": 4},
            },
        ]
    )
    assert "".join(p.text for p in pieces) == "Hi  there"
    assert "".join(p.reasoning for p in pieces) == "hmwhy"
    assert [p.refusal for p in pieces if p.refusal] == ["no"]
    calls = [c for p in pieces for c in p.tool_calls]
    assert [(c.index, c.id, c.name, c.arguments) for c in calls] == [(1, "c", "f", '{"a')]
    assert [p.finish for p in pieces if p.finish] == ["tool_calls"]
    assert pieces[-1].usage is not None and pieces[-1].usage.cached_tokens == 4
    assert (pieces[0].response_id, pieces[0].response_model) == ("r1", "m-1")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
FIELD = st.sampled_from(
    ["content", "reasoning_content", "reasoning", "refusal", "tool_calls", "role", "function"]
)
CHUNK_LIKE = st.fixed_dictionaries(
    {},
    optional={
        "id": JSON,
        "model": JSON,
        "usage": JSON
        | st.fixed_dictionaries(
            {}, optional={"prompt_tokens": JSON, "prompt_tokens_details": JSON}
        ),
        "choices": JSON
        | st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "delta": JSON | st.dictionaries(FIELD, JSON | st.lists(JSON), max_size=4),
                    "finish_reason": JSON,
                },
            ),
            max_size=2,
        ),
    },
)


@property_settings(500, ci=25)
@given(st.lists(JSON | CHUNK_LIKE, max_size=6))
def test_any_json_gives_well_typed_pieces_or_a_malformed_chunk(chunks: list[Any]) -> None:
    """A provider's stream is data from outside: whatever the shapes and types, the pieces
    are well typed (what the agent reads never holds a number where text goes) or the chunk
    is refused as malformed (which the model maps to ``ModelUnavailable``)."""
    reply = Reply()
    pieces: list[ModelChunk] = []
    for chunk in chunks:
        try:
            pieces += reply.translate(json.loads(json.dumps(chunk)))
        except MalformedChunk:
            assert not isinstance(chunk, dict)
    pieces += reply.close()
    for piece in pieces:
        assert isinstance(piece.text, str) and isinstance(piece.reasoning, str)
        assert isinstance(piece.refusal, str)
        assert piece.finish is None or isinstance(piece.finish, str)
        for call in piece.tool_calls:
            assert isinstance(call.index, int) and isinstance(call.arguments, str)
            assert call.id is None or isinstance(call.id, str)
            assert call.name is None or isinstance(call.name, str)
        if piece.usage is not None:
            assert isinstance(piece.usage.prompt_tokens, int)


@pytest.mark.parametrize("chunk", [[], "text", 3, None])
def test_a_chunk_that_is_not_an_object_is_malformed(chunk: Any) -> None:
    with pytest.raises(MalformedChunk):
        Reply().translate(chunk)


SPACE = st.sampled_from(["", " ", "\n", "\t ", "\r\n"])


@property_settings(500, ci=25)
@given(SPACE, JSON, SPACE, st.sampled_from(["", "", "x", "}", "[", '"', "1"]))
def test_parse_json_is_json_loads(before: str, value: Any, after: str, junk: str) -> None:
    """The short path to the scanner takes what ``json.loads`` takes and refuses what it
    refuses, whatever surrounds the value."""
    text = before + json.dumps(value) + after + junk
    try:
        expected: Any = json.loads(text)
    except ValueError as exc:
        with pytest.raises(ValueError):
            parse_json(text)
        assert isinstance(exc, ValueError)
    else:
        assert parse_json(text) == expected


@pytest.mark.parametrize("text", ["", " ", "NaN", "-Infinity", '"\\ud800"', "[1,]", "01"])
def test_parse_json_on_edges(text: str) -> None:
    try:
        expected: Any = json.loads(text)
    except ValueError:
        with pytest.raises(ValueError):
            parse_json(text)
    else:
        got = parse_json(text)
        assert got == expected or (got != got and expected != expected)  # NaN


def model_chunks(pieces: list[bytes]) -> list[ModelChunk]:
    """What ``OpenAIChatModel`` makes of a reply's bytes, each of ``pieces`` one read,
    without the HTTP: its ``ReplyReader`` (decoder, JSON, reply; ``[DONE]`` ends it)."""
    read, out = ReplyReader(Reply(), SSEDecoder(), REQUEST), []
    for piece in pieces:
        got, done, failed = read(piece)
        out += got
        if failed is not None:
            raise failed
        if done:
            break
    return out + read.reply.close()


REQUEST = httpx2.Request("POST", "http://model.test/v1/chat/completions")


def translated(stream: bytes) -> list[ModelChunk]:
    """The same bytes through ``Reply.translate`` alone, a chunk at a time: what
    ``ReplyReader``'s joined text must add up to."""
    decoder, reply, out = SSEDecoder(), Reply(), []
    for _, data in decoder.feed(stream):
        if data.startswith("[DONE]"):
            break
        out += reply.translate(parse_json(data))
    return out + reply.close()


def kinds(chunks: list[ModelChunk]) -> list[tuple[str, object]]:
    """What the chunks carry, in their order, plain text in a row as one."""
    said: list[tuple[str, object]] = []
    for c in chunks:
        for kind, value in (
            ("text", c.text),
            ("reasoning", c.reasoning),
            ("refusal", c.refusal),
            ("calls", c.tool_calls),
            ("finish", c.finish),
        ):
            if not value:
                continue
            if kind == "text" and said and said[-1][0] == "text":
                said[-1] = ("text", f"{said[-1][1]}{value}")
            else:
                said.append((kind, value))
    return said


def summary(chunks: list[ModelChunk]) -> tuple[str, str, str, list[tuple[int, str]], list[str]]:
    return (
        "".join(c.text for c in chunks),
        "".join(c.reasoning for c in chunks),
        "".join(c.refusal for c in chunks),
        [(t.index, t.arguments) for c in chunks for t in c.tool_calls],
        [c.finish for c in chunks if c.finish],
    )


DELTA = st.one_of(
    st.builds(lambda t: {"content": t}, st.text(min_size=1, max_size=6)),
    st.builds(lambda t: {"content": t}, st.sampled_from(["<think>", "</think>", "<th", "ink>"])),
    st.builds(lambda t: {"reasoning_content": t}, st.text(min_size=1, max_size=6)),
    st.builds(lambda t: {"refusal": t}, st.text(min_size=1, max_size=6)),
    st.builds(
        lambda i, t: {"tool_calls": [{"index": i, "function": {"arguments": t}}]},
        st.integers(0, 2),
        st.text(max_size=6),
    ),
)


@property_settings(200, ci=15)
@given(st.lists(DELTA, min_size=1, max_size=12), EOL)
def test_a_reply_cut_at_every_byte_gives_the_same_model_chunks(
    deltas: list[dict[str, Any]], eol: bytes
) -> None:
    events: list[dict[str, Any]]
    events = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    events[0]["id"] = "r1"
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    stream = b"".join(b"data: " + json.dumps(e).encode() + eol + eol for e in events)
    stream += b": done soon" + eol + b"data: [DONE]" + eol + eol
    whole = summary(model_chunks([stream]))
    assert kinds(model_chunks([stream])) == kinds(translated(stream))
    assert [c.response_id for c in model_chunks([stream]) if c.response_id] == ["r1"]
    assert whole[4] == ["stop"]
    for cut in range(len(stream) + 1):
        assert summary(model_chunks([stream[:cut], stream[cut:]])) == whole, cut
    # read an event at a time or all at once, the same things come in the same order (text
    # in a row within one read is joined, never across anything else)
    one_by_one = stream.split(eol + eol)
    assert kinds(model_chunks([s + eol + eol for s in one_by_one])) == kinds(model_chunks([stream]))


def test_text_in_one_read_comes_as_one_piece_and_the_rest_keeps_its_place() -> None:
    events: list[dict[str, Any]] = [
        {"id": "r1", "model": "m", "choices": [{"index": 0, "delta": {"content": "Thought"}}]},
        *({"choices": [{"index": 0, "delta": {"content": t}}]} for t in (": a", "b", "c\n")),
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1"}]}}]},
        *({"choices": [{"index": 0, "delta": {"content": t}}]} for t in ("Ans", "wer")),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    stream = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    chunks = model_chunks([stream + b"data: [DONE]\n\n"])
    assert [(c.text, c.response_id, bool(c.tool_calls), c.finish) for c in chunks] == [
        ("Thought", "r1", False, None),  # the first carries the reply's id: on its own
        (": abc\n", "", False, None),
        ("", "", True, None),
        ("Answer", "", False, None),
        ("", "", False, "stop"),
    ]
    assert chunks[2].tool_calls == (ToolCallDelta(index=0, id="c1"),)


def test_an_error_event_after_text_in_the_same_read_keeps_the_text() -> None:
    text = {"choices": [{"index": 0, "delta": {"content": "half an an"}}]}
    error = {"error": {"message": "overloaded", "type": "server_error"}}
    stream = b"data: " + json.dumps(text).encode() + b"\n\n"
    stream += b"data: " + json.dumps(error).encode() + b"\n\n"
    read = ReplyReader(Reply(), SSEDecoder(), REQUEST)
    pieces, done, failed = read(stream)
    assert [p.text for p in pieces] == ["half an an"] and not done
    assert isinstance(failed, openai.APIError)
