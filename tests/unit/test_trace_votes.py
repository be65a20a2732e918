"""Votes on a trace (Slack's feedback buttons): one per person, stored in the JSON, absent
from traces stored before they existed, shown by ``trace show`` (``to_markdown``)."""

from __future__ import annotations

import json

from core.trace import Trace, Vote


def test_a_vote_round_trips_through_json_and_the_latest_per_person_counts() -> None:
    trace = Trace(question="q", answer="a", status="answered")
    trace.vote("up", "U1ADA", 1.0)
    trace.vote("down", "U2BOB", 2.0)
    trace.vote("down", "U1ADA", 3.0)  # Ada changed her mind
    assert trace.votes == [Vote("down", "U2BOB", 2.0), Vote("down", "U1ADA", 3.0)]
    again = Trace.from_json(trace.to_json())
    assert again == trace
    assert again.feedback_line() == "👍 0 · 👎 2"


def test_a_trace_stored_before_votes_existed_still_loads() -> None:
    old = json.loads(Trace(question="q").to_json())
    del old["votes"]
    loaded = Trace.from_dict(old)
    assert loaded.votes == [] and loaded.feedback_line() is None
    assert "Feedback" not in loaded.to_markdown()


def test_malformed_stored_votes_are_skipped() -> None:
    data = json.loads(Trace(question="q").to_json())
    data["votes"] = [{"value": "sideways", "by": "x"}, "nope", {"value": "up", "by": "U1"}]
    assert Trace.from_dict(data).votes == [Vote("up", "U1", 0.0)]


def test_trace_show_prints_the_feedback() -> None:
    trace = Trace(question="q", answer="a", status="answered")
    trace.vote("up", "U1ADA", 1.0)
    assert "**Feedback:** 👍 1 · 👎 0 (U1ADA 👍)" in trace.to_markdown()
