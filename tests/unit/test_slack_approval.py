"""What approval buttons and modals carry, who may decide, and what a submission decides:
pure functions, checked against the fake Slack's own view validator."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.slack.approval import (
    BUTTON_VALUE_LIMIT,
    ApprovalRef,
    edit_value,
    may_decide,
    parse_button_value,
)
from adapters.slack.modals import (
    INPUT_BLOCK,
    REASON_BLOCK,
    FieldErrors,
    Submission,
    deny_modal,
    edit_modal,
    read_submission,
)
from tests.fakes.slack_server import PRIVATE_METADATA, validate_view

REF = ApprovalRef("3f2a9c1e0b7d", 2, 1, "U1ADA", "files_delete", json_input=True)
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def submitted(view: dict[str, Any], values: dict[str, str | None]) -> dict[str, Any]:
    """The view as Slack hands it back on submission (see FakeSlack.submission)."""
    state = {
        b["block_id"]: {"value": {"type": "plain_text_input", "value": values.get(b["block_id"])}}
        for b in view["blocks"]
        if b["type"] == "input"
    }
    return {**view, "state": {"values": state}}


def test_a_ref_round_trips_and_garbage_is_not_a_ref() -> None:
    assert ApprovalRef.decode(REF.encode()) == (REF, None)
    assert ApprovalRef.decode(REF.encode(verdict="deny")) == (REF, "deny")
    for junk in ("", "run123:U1ADA", "[1]", '{"r": "x", "s": -1, "c": 0}', '{"r": "x", "s": true}'):
        assert ApprovalRef.decode(junk) is None, junk
    assert ApprovalRef.decode('{"r":"x","s":1,"c":0,"v":"explode"}') is None


def test_an_asker_too_long_to_be_a_user_id_is_left_out() -> None:
    long = ApprovalRef("run", 1, 0, "U" * 500, "t" * 500)
    decoded = ApprovalRef.decode(long.encode())
    assert decoded is not None and decoded[0].asker is None and len(decoded[0].tool) == 80


def test_edit_carries_the_input_when_it_fits_in_a_button() -> None:
    value = edit_value(REF, '{"path": "a\nb"}')
    assert value is not None and parse_button_value(value) == (REF, '{"path": "a\nb"}')
    assert parse_button_value(REF.encode()) == (REF, None)
    assert edit_value(REF, "x" * BUTTON_VALUE_LIMIT) is None
    assert parse_button_value("not ours") is None


def test_who_may_decide() -> None:
    admins = frozenset({"UADMIN"})
    assert may_decide("asker", "U1ADA", "U1ADA", admins)
    assert may_decide("asker", "UADMIN", "U1ADA", admins)
    assert not may_decide("asker", "U2BOB", "U1ADA", admins)
    assert not may_decide("asker", "U2BOB", None, admins)
    assert not may_decide("admins", "U1ADA", "U1ADA", admins)
    assert may_decide("admins", "UADMIN", "U1ADA", admins)
    assert may_decide("anyone", "U2BOB", "U1ADA", frozenset())


def test_an_edit_decides_the_edited_input_and_an_unchanged_one_approves() -> None:
    view = edit_modal(REF, '{"path": "q3.md"}')
    edited = read_submission(submitted(view, {INPUT_BLOCK: '{"path": "old.md"}'}))
    assert edited == Submission(REF, "edit", '{"path": "old.md"}', "")
    same = read_submission(
        submitted(view, {INPUT_BLOCK: '{"path": "q3.md"}', REASON_BLOCK: " ok "})
    )
    assert same == Submission(REF, "approve", None, "ok")


def test_an_edit_the_tool_cannot_take_keeps_the_modal_open_saying_why() -> None:
    view = edit_modal(REF, '{"path": "q3.md"}')
    for text, words in [
        ('{"path": ', "This is not valid JSON ("),
        ("[1, 2]", "The tool takes a JSON object"),
        ("   ", "Write the input"),
        (None, "Write the input"),
    ]:
        result = read_submission(submitted(view, {INPUT_BLOCK: text}))
        assert isinstance(result, FieldErrors) and list(result.errors) == [INPUT_BLOCK]
        assert result.errors[INPUT_BLOCK].startswith(words), text
    plain = replace_json(REF, json_input=False)
    assert read_submission(submitted(edit_modal(plain, "x"), {INPUT_BLOCK: "[1"})) == Submission(
        plain, "edit", "[1", ""
    )


def replace_json(ref: ApprovalRef, *, json_input: bool) -> ApprovalRef:
    return ApprovalRef(ref.run_id, ref.step, ref.call, ref.asker, ref.tool, json_input)


def test_a_denial_with_and_without_a_reason() -> None:
    view = deny_modal(REF)
    assert read_submission(submitted(view, {REASON_BLOCK: " not that one "})) == Submission(
        REF, "deny", None, "not that one"
    )
    assert read_submission(submitted(view, {})) == Submission(REF, "deny", None, "")


def test_a_view_that_is_not_ours_decides_nothing() -> None:
    assert read_submission({"private_metadata": "", "state": {"values": {}}}) is None
    assert read_submission({"private_metadata": REF.encode(verdict="approve")}) is None


names = st.one_of(st.sampled_from(["files_delete", "<!channel>", "`x`", "a" * 300]), st.text())
inputs = st.one_of(st.text(max_size=2000), st.sampled_from(['{"path": "<!here>"}', "", "```"]))


@PROPERTY
@given(name=names, text=inputs, asker=st.one_of(st.none(), st.text(max_size=100)))
def test_modals_are_always_views_slack_opens(name: str, text: str, asker: str | None) -> None:
    ref = ApprovalRef("3f2a9c1e0b7d", 3, 0, asker, name, json_input=True)
    for view in (edit_modal(ref, text), deny_modal(ref)):
        assert validate_view(view) == [], view
        assert len(view["private_metadata"]) <= PRIVATE_METADATA
        # mrkdwn is escaped; the input field holds the raw text to edit (it renders nothing)
        assert "<!" not in view["blocks"][0]["text"]["text"]
    value = edit_value(ref, text)
    if value is not None:  # what the Edit button offers, the modal prefills exactly
        _, prefill = parse_button_value(value) or (None, None)
        view = edit_modal(ref, prefill or "")
        element = view["blocks"][1]["element"]
        assert element.get("initial_value", "") == text
        assert len(text) <= element["max_length"]
        unchanged = read_submission(submitted(view, {INPUT_BLOCK: text}))
        if text.strip():
            assert isinstance(unchanged, (Submission, FieldErrors))
            if isinstance(unchanged, Submission):
                assert unchanged.verdict == "approve"
