"""What approval buttons and modals carry, who may decide, and what a submission decides:
pure functions, the modals checked against the fake Slack's own view validator."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from adapters.decisions import Owner, Press, may_decide, may_stop
from adapters.slack.approval import ApprovalRef, parse_button_value
from adapters.slack.modals import (
    INPUT_BLOCK,
    REASON_BLOCK,
    FieldErrors,
    Submitted,
    decision_for,
    deny_modal,
    edit_modal,
    read_submission,
)
from core.approval import ApprovalRequest, Decision
from tests.fakes.slack_server import PRIVATE_METADATA, validate_view
from tests.properties import property_settings

REF = ApprovalRef("3f2a9c1e0b7d", 2, 1, "U1ADA")
REQUEST = ApprovalRequest(
    "3f2a9c1e0b7d", "c", "U1ADA", 2, 1, "", "files_delete", '{"path": "q3.md"}', True, 300, True
)
PROPERTY = property_settings(300)


def submitted(view: dict[str, Any], values: dict[str, str | None]) -> dict[str, Any]:
    """The view as Slack hands it back on submission (see FakeSlack.submission)."""
    state = {
        b["block_id"]: {"value": {"type": "plain_text_input", "value": values.get(b["block_id"])}}
        for b in view["blocks"]
        if b["type"] == "input"
    }
    return {**view, "state": {"values": state}}


def decide(view: dict[str, Any], values: dict[str, str | None], request: ApprovalRequest) -> Any:
    read = read_submission(submitted(view, values))
    assert read is not None
    return decision_for(read, request, by="U2BOB")


def test_a_ref_round_trips_and_garbage_is_not_a_ref() -> None:
    assert ApprovalRef.decode(REF.encode()) == (REF, None)
    assert ApprovalRef.decode(REF.encode(verdict="deny")) == (REF, "deny")
    assert parse_button_value(REF.encode()) == REF
    assert parse_button_value(REF.encode(verdict="edit")) is None, "a modal's, not a button's"
    for junk in ("", "run123:U1ADA", "[1]", '{"r": "x", "s": -1, "c": 0}', '{"r": "x", "s": true}'):
        assert ApprovalRef.decode(junk) is None, junk
    assert ApprovalRef.decode('{"r":"x","s":1,"c":0,"v":"explode"}') is None


def test_an_asker_too_long_to_be_a_user_id_is_left_out() -> None:
    long = ApprovalRef("run", 1, 0, "U" * 500)
    assert parse_button_value(long.encode()) == ApprovalRef("run", 1, 0, None)
    assert len(long.encode()) < 100


def test_who_may_decide_and_who_may_stop_one_rule_on_every_surface() -> None:
    ada = Owner("U1ADA", {"channel": "C1", "ts": "1.0"})
    nobody = Owner("", {"channel": "C1"})  # a record from before askers were kept

    def press(user: str, *, admin: bool = False, channel: str = "C1") -> Press:
        return Press(user, {"channel": channel}, admin=admin)

    assert may_decide("asker", press("U1ADA"), ada)
    assert may_decide("asker", press("UADMIN", admin=True), ada)
    assert not may_decide("asker", press("U2BOB"), ada)
    assert not may_decide("asker", press("U2BOB"), nobody)
    assert not may_decide("admins", press("U1ADA"), ada)
    assert may_decide("admins", press("UADMIN", admin=True), ada)
    assert may_decide("anyone", press("U2BOB"), ada)
    assert may_stop(press("U1ADA"), ada)
    assert may_stop(press("UADMIN", admin=True), ada)
    assert not may_stop(press("U2BOB"), ada)
    assert not may_stop(press("U2BOB"), nobody)
    # from another chat, or naming none, or about a run nobody runs: refused, even an admin
    for verdict in (
        may_stop(press("U1ADA", channel="C2"), ada),
        may_stop(press("UADMIN", admin=True, channel="C2"), ada),
        may_decide("anyone", press("U2BOB", channel="C2"), ada),
        may_stop(Press("U1ADA", {}), ada),
        may_stop(press("U1ADA", channel=""), ada),
        may_stop(press("U1ADA"), None),
        may_decide("anyone", press("U1ADA"), None),
    ):
        assert not verdict
    assert may_decide("asker", Press("U1ADA", None), ada)  # a modal: no place, the person is


def test_the_edit_modal_is_prefilled_and_an_edit_decides_the_edited_input() -> None:
    view = edit_modal(REF, REQUEST)
    element = view["blocks"][1]["element"]
    assert element["initial_value"] == REQUEST.input and element["multiline"] is True
    assert view["blocks"][1]["label"]["text"] == "Input (a JSON object)"
    edited = decide(view, {INPUT_BLOCK: '{"path": "old.md"}', REASON_BLOCK: " typo "}, REQUEST)
    assert edited == Decision("edit", "U2BOB", '{"path": "old.md"}', "typo")
    same = decide(view, {INPUT_BLOCK: REQUEST.input}, REQUEST)
    assert same == Decision("approve", "U2BOB"), "an edit that changed nothing approves"


def test_an_edit_the_tool_cannot_take_keeps_the_modal_open_saying_why() -> None:
    view = edit_modal(REF, REQUEST)
    for text, words in [
        ('{"path": ', "This is not valid JSON ("),
        ("[1, 2]", "The tool takes a JSON object"),
        ("   ", "Write the input"),
        (None, "Write the input"),
    ]:
        result = decide(view, {INPUT_BLOCK: text}, REQUEST)
        assert isinstance(result, FieldErrors) and list(result.errors) == [INPUT_BLOCK]
        assert result.errors[INPUT_BLOCK].startswith(words), text
    one_string = replace(REQUEST, json_input=False, input="q3.md")
    assert edit_modal(REF, one_string)["blocks"][1]["label"]["text"] == "Input"
    assert decide(view, {INPUT_BLOCK: "[1"}, one_string) == Decision("edit", "U2BOB", "[1", "")


def test_a_denial_with_and_without_a_reason() -> None:
    view = deny_modal(REF, REQUEST)
    read = read_submission(submitted(view, {REASON_BLOCK: " not that one "}))
    assert read == Submitted(REF, "deny", None, "not that one") and read.field == REASON_BLOCK
    assert decide(view, {REASON_BLOCK: "no"}, REQUEST) == Decision("deny", "U2BOB", reason="no")
    assert decide(view, {}, REQUEST) == Decision("deny", "U2BOB")


def test_a_view_that_is_not_ours_decides_nothing() -> None:
    assert read_submission({"private_metadata": "", "state": {"values": {}}}) is None
    assert read_submission({"private_metadata": REF.encode(verdict="approve")}) is None
    assert read_submission({"private_metadata": REF.encode()}) is None


names = st.one_of(st.sampled_from(["files_delete", "<!channel>", "`x`", "a" * 300]), st.text())
inputs = st.one_of(st.text(max_size=3000), st.sampled_from(['{"path": "<!here>"}', "", "```"]))


@PROPERTY
@given(name=names, text=inputs, asker=st.one_of(st.none(), st.text(max_size=100)))
def test_modals_are_always_views_slack_opens(name: str, text: str, asker: str | None) -> None:
    ref = ApprovalRef("3f2a9c1e0b7d", 3, 0, asker)
    request = replace(REQUEST, name=name, input=text)
    for view in (edit_modal(ref, request), deny_modal(ref, request)):
        assert validate_view(view) == [], view
        assert len(view["private_metadata"]) <= PRIVATE_METADATA
        # mrkdwn is escaped; the input field holds the raw text to edit (it renders nothing)
        assert "<!" not in view["blocks"][0]["text"]["text"]
    element = edit_modal(ref, request)["blocks"][1]["element"]
    assert element.get("initial_value", "") == text
    assert len(text) <= element["max_length"]
