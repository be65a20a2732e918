"""What became of an intent: refused (with the words for the person), dropped without a
word (a redelivery, a burst's later message), done (an ask's answer goes on), or said (a
command's reply, for the surface to show the person)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from core.trace import Trace

Reason = Literal[
    "duplicate",
    "merged",
    "closing",
    "access",
    "question",
    "model",
    "budget",
    "cooldown",
    "voice",
    "capacity",
    "overloaded",
    "busy",
    "who",
    "gone",
    "elsewhere",
    "retried",
]
"""Why an intent went no further: ``capacity`` and ``overloaded`` are the process's own room
(``adapters.room``: too many runs, a late event loop), ``busy`` the asker's runs at once;
``who`` a command this person may not give here (an admin's), or someone the run's record
does not let do it; ``gone`` a run or an action that no process runs or waits on any more,
``elsewhere`` a press from another place than the run's (a forged button), ``retried`` a
Retry already used."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Refused: the reason for code, the text for the person."""

    reason: Reason
    text: str


@dataclass(frozen=True, slots=True)
class Drop:
    """Nothing said: a duplicate delivery, or a message gathered into an earlier one's burst."""

    reason: Literal["duplicate", "merged"]


@dataclass(frozen=True, slots=True)
class Done:
    """Admitted: an ask's answer goes on in a task the dispatcher owns; a press acted on."""

    ack: str | None = None
    """The words of an ack that carries text (Telegram's callback answer), from
    ``adapters.words``; the other surfaces show the result in the message itself."""


@dataclass(frozen=True, slots=True)
class Said:
    """A command done: what to tell the person, in the shared words (Markdown emphasis,
    which each surface draws its way; outside text in it is the surface's to escape)."""

    text: str
    trace: Trace | None = None
    """``ShowTrace``: the trace to show (its files, its link), ``text`` naming it."""
    form: str | None = None
    """``EditPersona``: the persona as it is, for the platform's form (``text`` is empty)."""
    failed: bool = False
    """Nothing was changed (an unknown name, a persona too long, the store away): a form
    the change came from stays open with ``text`` as its error."""


Outcome = Refusal | Drop | Done | Said
