"""What is stored packed reads back exactly, in every format ever written (issue 25 item 6):
``core.stores.codec`` (zlib behind a format byte, a fixed dictionary) and the stored form of a trace
(compact JSON without empty fields, raw replies that refer to their thought and the answer
instead of holding a second copy)."""

from __future__ import annotations

import hashlib
import json
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.stores.codec import DICTIONARY, ZLIB, ZLIB_DICT, is_packed, pack, unpack
from core.stores.redis import TRACE_FORMAT, decode_trace, encode_trace, stored_json
from core.trace import ApprovalRecord, Trace, TraceAttachment, TraceStep, Vote
from tests.hostile import hostile_text
from tests.properties import property_settings

PROPERTY = property_settings(200)


def test_the_dictionary_never_changes() -> None:
    # Values packed with it live in Redis for weeks: a new dictionary needs a new format byte.
    assert hashlib.sha256(DICTIONARY).hexdigest()[:16] == "046f5e171422c5ed"
    assert len(DICTIONARY) <= 32 * 1024  # zlib uses at most a window's worth


@given(st.text())
def test_any_text_packs_and_unpacks(text: str) -> None:
    packed = pack(text)
    assert packed[:1] == ZLIB_DICT and is_packed(packed)
    assert unpack(packed) == text


def test_every_older_form_still_reads() -> None:
    text = '{"role":"assistant","content":"About 384,400 km. 月球 🌕"}'
    assert unpack(text) == text  # a str, as a decoding client returns old values
    assert unpack(text.encode()) == text  # plain JSON bytes: values stored before packing
    assert unpack(ZLIB + zlib.compress(text.encode())) == text  # zlib, no dictionary
    assert not is_packed(text.encode())


def test_a_damaged_value_is_a_value_error_not_garbage() -> None:
    packed = pack("the Moon is about 384,400 km away " * 20)
    with pytest.raises(ValueError):
        unpack(packed[: len(packed) // 2])
    with pytest.raises(ValueError):
        unpack(ZLIB_DICT + b"not zlib at all")


def test_prose_packs_to_well_under_its_size() -> None:
    answer = (
        "The Moon is on average 384,400 km from the Earth, so its light, which is sunlight "
        "it reflects, takes about 1.28 seconds to reach us. The distance changes over the "
        "month between about 363,000 km at perigee and 405,000 km at apogee, and with it "
        "the time, between 1.21 and 1.35 seconds."
    )
    message = json.dumps({"role": "assistant", "content": answer}, separators=(",", ":"))
    assert len(pack(message)) < 0.75 * len(message.encode())
    assert len(pack(message)) < len(ZLIB + zlib.compress(message.encode(), 9))


# ---- the stored trace ------------------------------------------------------------------------


def a_trace() -> Trace:
    thought = "The question asks for a distance and a time; the search will give the distance."
    answer = "About 384,400 km; its light takes about 1.28 s to reach us. 月球 🌕"
    steps = [
        TraceStep(
            1,
            thought=thought,
            action="search",
            action_input="moon distance",
            observation="1. Moon - Wikipedia\n   https://en.wikipedia.org/wiki/Moon\n   384,400 km",
            raw=f"Thought: {thought}\nAction: search[moon distance]",
            sources=["https://en.wikipedia.org/wiki/Moon"],
            started_at=1.5,
            ended_at=2.25,
            model="gpt-4o-mini",
            prompt_tokens=1200,
            completion_tokens=40,
            approval=ApprovalRecord("edited", by="ada", at=2.0, input="moon"),
            attachments=[TraceAttachment("image/png", 3, "AAAA", "moon.png")],
        ),
        TraceStep(
            2,
            kind="final",
            thought="I have both numbers now, and the answer follows from them.",
            raw=f"Thought: I have both numbers now, and the answer follows from them.\n"
            f"Final Answer: {answer}\n",
            prompt_tokens=0,
            cost_usd=0.0,
        ),
    ]
    return Trace(
        "How far is the Moon? 🌕",
        id="abc123def456",
        conversation="slack:T1:C1:1.0",
        user="ada",
        models=["gpt-4o-mini"],
        started_at=1.0,
        ended_at=3.0,
        steps=steps,
        answer=answer,
        status="answered",
        votes=[Vote("up", "bob", 4.0)],
    )


def test_the_stored_trace_leaves_out_empty_fields_and_second_copies() -> None:
    trace = a_trace()
    data = json.loads(stored_json(trace))
    first, final = data["steps"]
    assert "error" not in first and "reasoning" not in first and "call" not in first
    assert "replayed" not in final and "attachments" not in final
    # Non-empty defaults and zeros that are not the default stay, so nothing reads otherwise.
    assert first["kind"] == "step" and data["version"] == 1 and data["mode"] == "text"
    assert final["prompt_tokens"] == 0 and final["cost_usd"] == 0.0
    assert first["raw"] == ["Thought: ", {"f": "thought"}, "\nAction: search[moon distance]"]
    assert final["raw"][1:] == [{"f": "thought"}, "\nFinal Answer: ", {"f": "answer"}, "\n"]
    assert stored_json(trace).count(trace.answer or "") == 1


def test_the_stored_trace_reads_back_exactly() -> None:
    trace = a_trace()
    encoded = encode_trace(trace)
    assert encoded[:1] == TRACE_FORMAT
    assert decode_trace(encoded).to_dict() == trace.to_dict()
    assert len(encoded) < len(ZLIB + zlib.compress(trace.to_json().encode()))


def test_traces_stored_in_each_older_form_still_read() -> None:
    trace = a_trace()
    assert decode_trace(trace.to_json()).to_dict() == trace.to_dict()  # plain JSON text
    assert decode_trace(trace.to_json().encode()).to_dict() == trace.to_dict()
    old = ZLIB + zlib.compress(trace.to_json().encode(), 6)  # the first compressed form
    assert decode_trace(old).to_dict() == trace.to_dict()


def test_a_raw_reply_that_is_not_built_of_its_fields_is_kept_as_it_is() -> None:
    trace = a_trace()
    trace.steps[0].raw = "Thought: something else entirely, not the step's thought at all"
    trace.steps[1].raw = ""
    data = json.loads(stored_json(trace))
    assert data["steps"][0]["raw"] == trace.steps[0].raw
    assert "raw" not in data["steps"][1]
    assert decode_trace(encode_trace(trace)).to_dict() == trace.to_dict()


@st.composite
def traces(draw: st.DrawFn) -> Trace:
    """Traces whose raw replies hold their thought and the answer in any arrangement (once,
    twice, overlapping, inside one another, not at all), in hostile text."""
    text = hostile_text()
    answer = draw(st.none() | text)
    steps = []
    for n in range(1, draw(st.integers(0, 5)) + 1):
        thought = draw(text)
        pieces = draw(st.lists(st.sampled_from(["thought", "answer", "text", "half"]), max_size=5))
        raw = ""
        for piece in pieces:
            raw += {
                "thought": thought,
                "answer": answer or "",
                "half": thought[: len(thought) // 2] + (answer or "")[:3],
                "text": draw(text),
            }[piece]
        steps.append(
            TraceStep(
                n,
                kind=draw(st.sampled_from(["step", "format_error", "final"])),
                thought=thought,
                action=draw(st.none() | text),
                action_input=draw(st.none() | text),
                observation=draw(st.none() | text),
                raw=raw,
                call=draw(st.integers(0, 2)),
                prompt_tokens=draw(st.none() | st.integers(0, 10)),
                replayed=draw(st.booleans()),
            )
        )
    return Trace(
        draw(text),
        id=draw(st.text(min_size=1, max_size=12)),
        steps=steps,
        answer=answer,
        status=draw(st.sampled_from(["answered", "failed", "running"])),
        notices=draw(st.lists(text, max_size=2)),
        mode=draw(st.sampled_from(["text", "tools", ""])),
    )


@PROPERTY
@given(traces())
def test_any_trace_reads_back_exactly_from_its_stored_form(trace: Trace) -> None:
    assert decode_trace(encode_trace(trace)).to_dict() == trace.to_dict()
