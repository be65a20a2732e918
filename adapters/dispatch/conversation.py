"""Which conversation an event belongs to, decided in one place for every surface and every
intent: a message, a command and a button in the same place agree.

``conversation_of`` is the history, files and traces key; ``settings_place`` where a
place's settings and budget live (a thread follows its channel); ``burst_key`` what one
burst gathers (one person, one conversation).
"""

from __future__ import annotations

from adapters.dispatch.intents import Actor, Where
from adapters.policy import Policy


def conversation_of(where: Where, policy: Policy, *, root: str | None = None) -> str:
    """The conversation of an event at ``where``. ``root``: the message a surface posted
    to start a thread for the answer (Slack), when there is one.

    - discord: ``discord:{channel}``; a thread its own (``discord:{thread}``) unless
      ``per_thread`` is off, a private thread always its own, a thread the bot opened on
      an answer its channel's;
    - slack: ``slack:{team}:{channel}[:{thread or root}]``, a DM one conversation unless
      the person threads it, the whole channel one with ``per_thread`` off;
    - telegram: ``telegram:{chat}[:{topic}]``; web: ``web:{session}``.
    """
    p, kind = where.platform, where.kind
    base = f"{p}:{where.space}:{where.channel}" if p == "slack" else f"{p}:{where.channel}"
    if p == "slack":
        thread = where.thread if kind == "dm" else where.thread or root
        return f"{base}:{thread}" if thread and policy.per_thread else base
    if kind == "private_thread" or (kind == "thread" and policy.per_thread):
        return f"{p}:{where.thread}"
    if kind == "topic":
        return f"{base}:{where.thread}"
    return base


def settings_place(where: Where) -> str:
    """Where the place's settings (and its daily budget) are kept: a thread or topic
    follows its channel; a DM and a session are their own."""
    if where.platform == "slack":
        return f"slack:{where.space}:{where.channel}"
    return f"{where.platform}:{where.channel}"


def burst_key(actor: Actor, where: Where, policy: Policy) -> str:
    """One person in one conversation: what ``agent.merge_window`` gathers together."""
    return f"{actor.key}\x00{conversation_of(where, policy)}"
