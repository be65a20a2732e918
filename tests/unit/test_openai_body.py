"""``EncodedHistories``: a run's history encoded once, each step adding its own messages, and
always the same JSON as encoding the whole history again."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from core.history import Message
from core.openai_model import EncodedHistories, wire_messages
from tests.properties import property_settings

MESSAGE = st.builds(
    lambda role, content, images: (
        {"role": role, "content": content} | ({"images": images} if images else {})
    ),
    st.sampled_from(["system", "user", "assistant"]),
    st.text(max_size=20),
    st.lists(st.just("data:image/png;base64,AAAA"), max_size=2),
)
EDIT = st.one_of(
    st.tuples(st.just("append"), MESSAGE),
    st.tuples(st.just("replace"), MESSAGE),  # a new dict put in the place of one
    st.tuples(st.just("pop"), st.none()),
    st.tuples(st.just("new run"), MESSAGE),
)


@property_settings(300, ci=25)
@given(st.lists(EDIT, max_size=25), st.integers(min_value=1, max_value=3))
def test_every_step_encodes_what_the_whole_history_encodes(
    edits: list[tuple[str, Message | None]], limit: int
) -> None:
    histories = EncodedHistories(limit=limit)
    runs: list[list[Message]] = [[]]
    for turn, (kind, message) in enumerate(edits):
        messages = runs[turn % len(runs)]
        if kind == "append" and message is not None:
            messages.append(message)
        elif kind == "replace" and message is not None and messages:
            messages[len(messages) // 2] = message
        elif kind == "pop" and messages:
            messages.pop()
        elif kind == "new run" and message is not None:
            runs.append([message])
            messages = runs[-1]
        assert json.loads(histories.encode(messages)) == wire_messages(messages)


def test_a_step_encodes_only_the_messages_it_added() -> None:
    """Shown by a change made in place, which a run never makes: the message sent before
    is not read again, the ones after it are."""
    histories = EncodedHistories()
    messages: list[Message] = [{"role": "user", "content": "q"}]
    histories.encode(messages)
    messages[0]["content"] = "changed in place"
    messages.append({"role": "assistant", "content": "a"})
    sent = json.loads(histories.encode(messages))
    assert [m["content"] for m in sent] == ["q", "a"]
    assert [m["content"] for m in json.loads(histories.encode(list(messages)))] == [
        "changed in place",
        "a",
    ]  # another list: another run, encoded whole


def test_a_run_that_ended_is_forgotten_at_the_next_encode() -> None:
    """Its list held by nothing but the cache, a run's history and JSON are dropped, not kept
    until ``limit`` newer runs pushed them out; a run still going keeps its entry."""
    histories = EncodedHistories(limit=256)
    going: list[Message] = [{"role": "user", "content": "still going"}]
    histories.encode(going)
    ended: list[Message] = [{"role": "user", "content": "x" * 10_000}]
    histories.encode(ended)
    assert len(histories) == 2
    del ended
    histories.encode(going)
    assert len(histories) == 1, "the ended run's entry is gone"
    later: list[Message] = [{"role": "user", "content": "later"}]
    histories.encode(later)
    assert len(histories) == 2, "runs still going are kept"
    sent = json.loads(histories.encode(going))
    assert sent == wire_messages(going)


def test_an_ended_run_behind_one_still_going_is_forgotten_too() -> None:
    """The oldest entry waits long (an approval) and is not encoded again: the ended runs
    after it are dropped all the same."""
    histories = EncodedHistories(limit=256)
    waiting: list[Message] = [{"role": "user", "content": "waits on an approval"}]
    histories.encode(waiting)
    ended: list[Message] = [{"role": "user", "content": "y" * 10_000}]
    histories.encode(ended)
    del ended
    newer: list[Message] = [{"role": "user", "content": "newer"}]
    histories.encode(newer)
    assert len(histories) == 2, "the waiting run and the newer one; the ended one is gone"
    assert json.loads(histories.encode(waiting)) == wire_messages(waiting)
