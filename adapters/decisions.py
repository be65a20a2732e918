"""Who may decide about a run, on every surface: one rule, checked against the run's own
stored request, wherever the run lives.

::

    a press (Stop, Approve / Edit / Deny, Retry's place) at any process
      -> Press: who pressed and where, as the platform vouches for them (the event's
         sender, the chat of the message pressed); never what the button's data says
      -> Owner: the run's own word on who asked and where its message is: the Ask in
         the process that runs it, else its record in the shared run registry
         (``core.stores.RunRecord``), which only that process writes
      -> asker_or_admin / approver (who), then in_place (from where): the same answer
         at every process (``adapters.dispatch.handlers.stop`` and ``.decide`` say
         which failed; ``may_stop`` / ``may_decide`` are both at once)
    Retry (the run is over): may_retry, the stored trace's conversation against the
      places the press came from

A button's data (a run id, an asker) is written by the client as much as by us: Telegram
passes on any callback data, and a run id is read by everyone who sees the button. So the
run id only says *which* run; *who* may stop or decide it and *from where* come from the
run's own record. A press from another chat than the run's does nothing even for an admin
or the asker: the run's buttons are only in its own chat, so such a press is forged (and
they are told the button is for an answer elsewhere).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Press:
    """Who pressed, and where, as the platform vouches for them."""

    user: str
    """The presser's id on the platform (the event's sender)."""
    at: Mapping[str, str] | None
    """Where the press came from, in the keys of the surface's own ``Reply.where()``
    (``{"chat": "42"}``, ``{"channel": "C1"}``, ``{"session": "s"}``): each must match the
    run's. None only for an event the platform vouches carries no place and that only
    follows a checked press (a Slack modal, submitted only by the person it was opened
    for); an empty mapping names no place and is refused."""
    admin: bool = False


@dataclass(frozen=True, slots=True)
class Owner:
    """The run's own stored request: who asked it, and where its message is."""

    asker: str
    where: Mapping[str, str] = field(default_factory=dict)


def in_place(press: Press, owner: Owner) -> bool:
    """Whether the press came from the run's own place (every key it names matches)."""
    if press.at is None:
        return True
    return bool(press.at) and all(
        value and owner.where.get(key) == value for key, value in press.at.items()
    )


def asker_or_admin(press: Press, owner: Owner) -> bool:
    """Who may stop a run: the person who asked, or an admin (wherever they pressed)."""
    return press.admin or (bool(owner.asker) and press.user == owner.asker)


def approver(approvers: str, press: Press, owner: Owner) -> bool:
    """Who may decide on a run's action: the ``agent.approval.approvers`` policy
    (``asker``: the asker or an admin; ``admins``; ``anyone``), wherever they pressed."""
    if approvers == "anyone" or press.admin:
        return True
    return approvers == "asker" and bool(owner.asker) and press.user == owner.asker


def may_stop(press: Press, owner: Owner | None) -> bool:
    """The person who asked, or an admin; from the run's own place."""
    return owner is not None and in_place(press, owner) and asker_or_admin(press, owner)


def may_decide(approvers: str, press: Press, owner: Owner | None) -> bool:
    """One of the approvers, from the run's own place."""
    return owner is not None and in_place(press, owner) and approver(approvers, press, owner)


def may_retry(conversation: str, places: Collection[str]) -> bool:
    """Retry asks an interrupted run's question again only from the run's own place: its
    stored trace's ``conversation`` must be one of the ``places`` the press came from, as
    the platform vouches for them (the chat, its thread or parent, in the surface's own
    conversation ids). A run id from elsewhere would read out, and ask again, a question
    of a conversation the presser may not see."""
    return bool(conversation) and conversation in places
