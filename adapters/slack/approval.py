"""What an approval button or modal carries, and who may decide.

A click may reach a replica that does not run the run (Slack picks one), so every button
carries what deciding needs: the broker's key (run id, step, call), the asker (for the
permission check) and the tool's name; the Edit button also carries the input it prefills
(a button ``value`` holds 2,000 characters, so Edit is offered for inputs that fit). A modal
carries the same in its ``private_metadata`` (3,000 characters), with the verdict it submits.

The verdict of a button is its ``action_id``; a modal's is in its metadata.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

from core.approval import RequestKey, Verdict

Approvers = Literal["asker", "admins", "anyone"]
"""``agent.approval.approvers``: who may decide (``asker``: the asker or an admin)."""

APPROVE_ACTION_ID = "reactbot_approve"
EDIT_ACTION_ID = "reactbot_edit"
DENY_ACTION_ID = "reactbot_deny"
ALWAYS_ACTION_ID = "reactbot_always"
VERDICT_OF_ACTION: dict[str, Verdict] = {
    APPROVE_ACTION_ID: "approve",
    EDIT_ACTION_ID: "edit",
    DENY_ACTION_ID: "deny",
    ALWAYS_ACTION_ID: "always",
}
APPROVAL_VIEW_ID = "reactbot_approval"
"""The ``callback_id`` of the Edit and Deny modals."""

BUTTON_VALUE_LIMIT = 2000
"""A button's ``value``: at most 2,000 characters (Slack's button element; the fake checks it)."""
METADATA_LIMIT = 3000
"""A view's ``private_metadata``: at most 3,000 characters."""
EDIT_LIMIT = 3000
"""The edit field's ``max_length``: the most a plain_text_input may be given."""
NAME_ROOM = 80
ASKER_ROOM = 64
"""A Slack user id is about 11 characters; an asker longer than this is no user id, and is
left out (the run's own replica knows who asked; elsewhere only an admin may decide)."""


@dataclass(frozen=True, slots=True)
class ApprovalRef:
    """Which pending action a button or modal is about."""

    run_id: str
    step: int
    call: int
    asker: str | None
    tool: str
    json_input: bool = False

    @property
    def key(self) -> RequestKey:
        return (self.run_id, self.step, self.call)

    def encode(self, *, verdict: Verdict | None = None) -> str:
        """Compact JSON, one line (a newline never appears in it: JSON escapes them)."""
        data: dict[str, Any] = {"r": self.run_id, "s": self.step, "c": self.call}
        if self.asker and len(self.asker) <= ASKER_ROOM:
            data["a"] = self.asker
        data["t"] = self.tool[:NAME_ROOM]
        if self.json_input:
            data["j"] = 1
        if verdict is not None:
            data["v"] = verdict
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> tuple[ApprovalRef, Verdict | None] | None:
        """The ref and the verdict (modals only) in ``text``; None for anything else."""
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        run_id, step, call = data.get("r"), data.get("s"), data.get("c")
        asker, tool, verdict = data.get("a"), data.get("t", ""), data.get("v")
        if not isinstance(run_id, str) or not run_id or not isinstance(tool, str):
            return None
        if not _count(step) or not _count(call):
            return None
        if asker is not None and not isinstance(asker, str):
            return None
        if verdict is not None and verdict not in ("approve", "edit", "deny", "always"):
            return None
        ref = cls(run_id, step, call, asker or None, tool, bool(data.get("j")))
        return ref, verdict


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def button_value(ref: ApprovalRef) -> str:
    return ref.encode()


def edit_value(ref: ApprovalRef, text: str) -> str | None:
    """The Edit button's value: the ref, a newline, the input to prefill; None when the input
    does not fit in a button (or in the edit field), and then Edit is not offered."""
    value = f"{ref.encode()}\n{text}"
    if len(value) > BUTTON_VALUE_LIMIT or len(text) > EDIT_LIMIT:
        return None
    return value


def parse_button_value(value: str) -> tuple[ApprovalRef, str | None] | None:
    """``(ref, the input to edit)`` from a button's value (the input only on Edit's)."""
    head, newline, text = value.partition("\n")
    decoded = ApprovalRef.decode(head)
    if decoded is None:
        return None
    return decoded[0], (text if newline else None)


def may_decide(approvers: Approvers, user: str, asker: str | None, admins: frozenset[str]) -> bool:
    """The ``agent.approval.approvers`` policy: the asker or an admin, admins, or anyone."""
    if approvers == "anyone":
        return True
    if user in admins:
        return True
    return approvers == "asker" and asker is not None and user == asker
