"""The Edit and Deny modals of an action waiting for approval, and what a submission says.

Pure functions of a ``ApprovalRef`` (and the input to edit) to a view for ``views.open``, and
of the submitted view to a ``Submission`` or the field errors Slack shows in the modal
(``response_action: "errors"``, keyed by the input block's ``block_id``). The view carries
what deciding needs in its ``private_metadata``: the ref, the verdict, and for Edit the
input as it was, so an edit that changed nothing is an approval.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from adapters.slack.approval import (
    APPROVAL_VIEW_ID,
    EDIT_LIMIT,
    METADATA_LIMIT,
    ApprovalRef,
)
from adapters.slack.render import NAME_LIMIT, Block, prose, section
from core.approval import Verdict

INPUT_BLOCK = "reactbot_input"
REASON_BLOCK = "reactbot_reason"
VALUE = "value"
REASON_LIMIT = 500
"""What a person may write to the model about their decision."""
JSON_ERROR_ROOM = 150


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text, "emoji": True}


def _input(block_id: str, label: str, element: dict[str, Any], *, optional: bool) -> Block:
    return {
        "type": "input",
        "block_id": block_id,
        "label": _plain(label),
        "element": {"type": "plain_text_input", "action_id": VALUE, **element},
        "optional": optional,
    }


def _reason(label: str) -> Block:
    return _input(
        REASON_BLOCK, label, {"multiline": True, "max_length": REASON_LIMIT}, optional=True
    )


def _metadata(ref: ApprovalRef, verdict: Verdict, text: str | None = None) -> str:
    head = ref.encode(verdict=verdict)
    if text is None:
        return head
    metadata = f"{head}\n{text}"
    return metadata if len(metadata) <= METADATA_LIMIT else head


def edit_modal(ref: ApprovalRef, text: str) -> dict[str, Any]:
    """The input in a multi-line field to change (JSON for a tool with several arguments),
    and an optional note for the model."""
    element: dict[str, Any] = {"multiline": True, "max_length": EDIT_LIMIT, "focus_on_load": True}
    if text:
        element["initial_value"] = text[:EDIT_LIMIT]
    label = "Input (a JSON object)" if ref.json_input else "Input"
    tool = prose(ref.tool or "the tool", NAME_LIMIT)
    return {
        "type": "modal",
        "callback_id": APPROVAL_VIEW_ID,
        "private_metadata": _metadata(ref, "edit", text),
        "title": _plain("Edit the action"),
        "submit": _plain("Run it"),
        "close": _plain("Cancel"),
        "blocks": [
            section(f"*{tool}* runs with what you write here; the model is told you edited it."),
            _input(INPUT_BLOCK, label, element, optional=False),
            _reason("Note for the model (optional)"),
        ],
    }


def deny_modal(ref: ApprovalRef) -> dict[str, Any]:
    """An optional reason; the model reads that the action was denied, and why."""
    tool = prose(ref.tool or "the tool", NAME_LIMIT)
    return {
        "type": "modal",
        "callback_id": APPROVAL_VIEW_ID,
        "private_metadata": _metadata(ref, "deny"),
        "title": _plain("Deny the action"),
        "submit": _plain("Deny"),
        "close": _plain("Cancel"),
        "blocks": [
            section(f"*{tool}* will not run. The model is told you denied it, and why if you say."),
            _reason("Reason (optional; the model reads it)"),
        ],
    }


@dataclass(frozen=True, slots=True)
class Submission:
    ref: ApprovalRef
    verdict: Verdict
    input: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class FieldErrors:
    """What to show in the modal instead of closing it: messages by input ``block_id``."""

    errors: dict[str, str]


def read_submission(view: dict[str, Any]) -> Submission | FieldErrors | None:
    """What a submitted Edit or Deny modal decides; ``FieldErrors`` for input the tool cannot
    take (not JSON where JSON is needed, nothing at all); None when the view is not ours."""
    head, newline, before = str(view.get("private_metadata", "")).partition("\n")
    decoded = ApprovalRef.decode(head)
    if decoded is None or decoded[1] not in ("edit", "deny"):
        return None
    ref, verdict = decoded
    assert verdict is not None
    values = view.get("state", {}).get("values", {})
    reason = (_value(values, REASON_BLOCK) or "").strip()
    if verdict == "deny":
        return Submission(ref, "deny", None, reason)
    text = _value(values, INPUT_BLOCK)
    problem = _input_problem(text, json_input=ref.json_input)
    if problem is not None:
        return FieldErrors({INPUT_BLOCK: problem})
    assert text is not None
    if newline and text == before:  # nothing changed: an approval, and the model is told so
        return Submission(ref, "approve", None, reason)
    return Submission(ref, "edit", text, reason)


def _value(values: Any, block_id: str) -> str | None:
    try:
        value = values[block_id][VALUE]["value"]
    except (KeyError, TypeError):
        return None
    return value if isinstance(value, str) else None


def _input_problem(text: str | None, *, json_input: bool) -> str | None:
    if text is None or not text.strip():
        return "Write the input the tool should run with, or cancel."
    if not json_input:
        return None
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        return f"This is not valid JSON ({str(exc)[:JSON_ERROR_ROOM]})."
    if not isinstance(parsed, dict):
        return 'The tool takes a JSON object, like {"name": "value"}.'
    return None
