"""The HTTP status of each refusal, for every route of the web chat (ask, Retry, Stop,
Decide, the commands): one table, every ``Reason`` in it (a new reason without a status
fails the import's test, not a person's request)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from adapters.dispatch.outcome import Reason, Refusal

STATUS: Final[Mapping[Reason, int]] = MappingProxyType(
    {
        # the question itself: the asker can change it
        "question": 400,
        "model": 400,
        "voice": 400,
        # not this person, or not from here
        "access": 403,
        "who": 403,
        "elsewhere": 403,
        # the run's or the event's state: done already, gone
        "gone": 409,
        "retried": 409,
        "duplicate": 409,
        "merged": 409,
        # too much now, the asker's or the process's: later
        "budget": 429,
        "cooldown": 429,
        "busy": 429,
        "capacity": 429,
        "overloaded": 429,
        # the process is restarting (as ``/api/ask`` says while it closes)
        "closing": 503,
    }
)


def refused(refusal: Refusal) -> tuple[dict[str, Any], int]:
    """The JSON body and status that tell the page why."""
    return {"error": refusal.text, "reason": refusal.reason}, STATUS[refusal.reason]
