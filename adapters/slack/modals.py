"""The Edit and Deny modals of an action waiting for approval, and what a submission decides.

Pure functions: a view for ``views.open`` from the ref and the request (its tool and input),
and, from a submitted view and the request it is about, the ``Decision`` or the field errors
Slack shows in the modal (``response_action: "errors"``, keyed by the input block's
``block_id``). The view carries only the ref and the verdict in its ``private_metadata``;
the request is read again when it is submitted (it may have been decided meanwhile).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from adapters.slack.approval import APPROVAL_VIEW_ID, EDIT_LIMIT, ApprovalRef
from adapters.slack.blocks import NAME_LIMIT, Block, prose, section
from adapters.words import BUTTONS
from core.approval import ApprovalRequest, Decision

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
    element = {"multiline": True, "max_length": REASON_LIMIT}
    return _input(REASON_BLOCK, label, element, optional=True)


def edit_modal(ref: ApprovalRef, request: ApprovalRequest) -> dict[str, Any]:
    """The input in a multi-line field to change (JSON for a tool with several arguments),
    and an optional note for the model."""
    element: dict[str, Any] = {"multiline": True, "max_length": EDIT_LIMIT, "focus_on_load": True}
    if request.input:
        element["initial_value"] = request.input[:EDIT_LIMIT]
    label = "Input (a JSON object)" if request.json_input else "Input"
    tool = prose(request.name or "the tool", NAME_LIMIT)
    return {
        "type": "modal",
        "callback_id": APPROVAL_VIEW_ID,
        "private_metadata": ref.encode(verdict="edit"),
        "title": _plain("Edit the action"),
        "submit": _plain("Run it"),
        "close": _plain("Cancel"),
        "blocks": [
            section(f"*{tool}* runs with what you write here; the model is told you edited it."),
            _input(INPUT_BLOCK, label, element, optional=False),
            _reason("Note for the model (optional)"),
        ],
    }


def deny_modal(ref: ApprovalRef, request: ApprovalRequest) -> dict[str, Any]:
    """An optional reason; the model reads that the action was denied, and why."""
    tool = prose(request.name or "the tool", NAME_LIMIT)
    return {
        "type": "modal",
        "callback_id": APPROVAL_VIEW_ID,
        "private_metadata": ref.encode(verdict="deny"),
        "title": _plain("Deny the action"),
        "submit": _plain(BUTTONS["deny"].text),
        "close": _plain("Cancel"),
        "blocks": [
            section(f"*{tool}* will not run. The model is told you denied it, and why if you say."),
            _reason("Reason (optional; the model reads it)"),
        ],
    }


@dataclass(frozen=True, slots=True)
class Submitted:
    """What a person submitted in an Edit or Deny modal, before it is checked."""

    ref: ApprovalRef
    verdict: Literal["edit", "deny"]
    text: str | None
    """The edit field (None in a Deny modal, or left empty)."""
    reason: str

    @property
    def field(self) -> str:
        """The input block where a problem with this submission is shown."""
        return INPUT_BLOCK if self.verdict == "edit" else REASON_BLOCK


@dataclass(frozen=True, slots=True)
class FieldErrors:
    """What to show in the modal instead of closing it: messages by input ``block_id``."""

    errors: dict[str, str]


def read_submission(view: dict[str, Any]) -> Submitted | None:
    """The submitted values of one of our modals; None for a view that is not ours."""
    decoded = ApprovalRef.decode(str(view.get("private_metadata", "")))
    if decoded is None:
        return None
    ref, verdict = decoded
    if verdict != "edit" and verdict != "deny":
        return None
    values = view.get("state", {}).get("values", {})
    reason = (_value(values, REASON_BLOCK) or "").strip()
    text = _value(values, INPUT_BLOCK) if verdict == "edit" else None
    return Submitted(ref, verdict, text, reason)


def decision_for(
    submitted: Submitted, request: ApprovalRequest, *, by: str
) -> Decision | FieldErrors:
    """What the submission decides on ``request``: a denial, the edited input, an approval
    (an edit that changed nothing), or ``FieldErrors`` for input the tool cannot take."""
    if submitted.verdict == "deny":
        return Decision("deny", by, reason=submitted.reason)
    text = submitted.text
    problem = _input_problem(text, json_input=request.json_input)
    if problem is not None:
        return FieldErrors({INPUT_BLOCK: problem})
    assert text is not None
    if text == request.input:  # nothing changed: an approval, not an edit the model is told of
        return Decision("approve", by, reason=submitted.reason)
    return Decision("edit", by, text, submitted.reason)


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


# ---- a channel's persona ------------------------------------------------------------------

PERSONA_VIEW_ID = "reactbot_persona"


def persona_modal(key: str, channel: str, current: str, limit: int) -> dict[str, Any]:
    """The channel's persona to edit (empty clears it); the view remembers which channel."""
    element: dict[str, Any] = {"multiline": True, "max_length": limit, "focus_on_load": True}
    if current:
        element["initial_value"] = current[:limit]
    return {
        "type": "modal",
        "callback_id": PERSONA_VIEW_ID,
        "private_metadata": json.dumps({"key": key, "channel": channel}),
        "title": _plain("This channel's persona"),
        "submit": _plain("Save"),
        "close": _plain("Cancel"),
        "blocks": [
            section(
                "Tone, focus or language for answers here. It goes below reactbot's own "
                "instructions and cannot change the format or the tool rules. Empty: none."
            ),
            _input(INPUT_BLOCK, "Persona", element, optional=True),
        ],
    }


def read_persona(view: dict[str, Any]) -> tuple[str, str, str] | None:
    """(settings key, channel, text) from a submitted persona view; None if it is not one."""
    try:
        meta = json.loads(str(view.get("private_metadata", "")))
        key, channel = str(meta["key"]), str(meta["channel"])
    except (ValueError, KeyError, TypeError):
        return None
    return key, channel, _value(view.get("state", {}).get("values"), INPUT_BLOCK) or ""
