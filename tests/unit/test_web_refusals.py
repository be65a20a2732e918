"""The web chat's one table from a refusal's reason to its HTTP status: every ``Reason``
has its status, and each is the one its kind of refusal should have."""

from __future__ import annotations

from typing import get_args

import pytest

from adapters.dispatch.outcome import Reason, Refusal
from adapters.web.refusals import STATUS, refused

EXPECTED: dict[str, int] = {
    "question": 400, "model": 400, "voice": 400,  # the question: the asker can change it
    "access": 403, "who": 403, "elsewhere": 403,  # not this person, or not from here
    "gone": 409, "retried": 409, "duplicate": 409, "merged": 409,  # the state: done, gone
    "budget": 429, "cooldown": 429, "busy": 429,  # too much now: later
    "capacity": 429, "overloaded": 429,
    "closing": 503,  # restarting
}  # fmt: skip


def test_the_table_has_every_reason_and_no_other() -> None:
    assert set(STATUS) == set(get_args(Reason))
    assert set(EXPECTED) == set(get_args(Reason)), "a new reason: say its status here too"


@pytest.mark.parametrize("reason", get_args(Reason))
def test_each_refusal_answers_with_its_status_and_says_why(reason: Reason) -> None:
    body, status = refused(Refusal(reason, "<b>why</b> ⏳"))
    assert status == EXPECTED[reason]
    assert body == {"error": "<b>why</b> ⏳", "reason": reason}
