"""What an approval button or modal carries, and who may decide.

A click may reach a replica that does not run the run (Slack picks one). Each button carries
the broker's key (run id, step, call) and the asker; the replica that gets the click reads
the request itself (its input, the tool, who asked) from the broker, which shares waiting
requests between processes (``ApprovalBroker.request``). A modal carries the same key in its
``private_metadata``, with the verdict it submits; a button's verdict is its ``action_id``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeGuard

from core.approval import RequestKey, Verdict

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

EDIT_LIMIT = 3000
"""The edit field's ``max_length``: the most a plain_text_input may be given."""
ASKER_ROOM = 64
"""A Slack user id is about 11 characters; an asker longer than this is no user id, and is
left out (the run's own replica knows who asked; elsewhere only an admin may decide)."""


@dataclass(frozen=True, slots=True)
class ApprovalRef:
    """Which pending action a button or modal is about, and who asked (the button's word,
    for when the request itself cannot be read)."""

    run_id: str
    step: int
    call: int
    asker: str | None

    @property
    def key(self) -> RequestKey:
        return (self.run_id, self.step, self.call)

    def encode(self, *, verdict: Verdict | None = None) -> str:
        """Compact JSON: a button's value, or with the verdict a modal's metadata."""
        data: dict[str, Any] = {"r": self.run_id, "s": self.step, "c": self.call}
        if self.asker and len(self.asker) <= ASKER_ROOM:
            data["a"] = self.asker
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
        asker, verdict = data.get("a"), data.get("v")
        if not isinstance(run_id, str) or not run_id or not _count(step) or not _count(call):
            return None
        if asker is not None and not isinstance(asker, str):
            return None
        if verdict is not None and verdict not in ("approve", "edit", "deny", "always"):
            return None
        return cls(run_id, step, call, asker or None), verdict


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def parse_button_value(value: str) -> ApprovalRef | None:
    decoded = ApprovalRef.decode(value)
    return decoded[0] if decoded is not None and decoded[1] is None else None


def editable(text: str) -> bool:
    """Whether an input fits the Edit modal's field (else Edit is not offered)."""
    return len(text) <= EDIT_LIMIT
