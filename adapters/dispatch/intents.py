"""What a person asked the bot to do, as a surface reads it from a platform event.

A surface translates its event into an intent: who did it (``Actor``), where (``Where``), the
event's own id (claimed once) and what was asked. Which conversation that is, who may do it,
and how often, are decided once for every surface (``adapters.dispatch``), never by the
surface. Today: ``Ask``; ``Memory`` (handled by ``adapters.dispatch.memory``); ``Reset``,
``ShowTrace``, ``Vote``, ``Settings`` and ``Usage`` (``adapters.dispatch.commands``: each
declares the checks it passes, ``checks``); ``Stop`` and ``Decide`` (presses on a run's
buttons, ``adapters.dispatch.handlers``: the run's own record says who may and from where);
``Retry`` (``Dispatcher.retry``: the interrupted run's question asked again, once).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Generic, Literal, TypeVar

from adapters.context import EarlierReader
from adapters.decisions import Press
from adapters.live import Verbosity
from core.files import Incoming
from core.memories import Where as MemoryPlace

PlaceKind = Literal[
    "dm", "channel", "thread", "private_thread", "bot_thread", "topic", "assistant", "session"
]
"""Where an event happened, as far as its conversation goes: a Discord thread the bot opened
on one of its answers (``bot_thread``) continues the answer's channel; a Telegram forum
``topic`` and a Slack ``assistant`` thread are conversations of their own; a web ``session``
is its own place."""

W = TypeVar("W")
"""The surface's own record of the event (what its Reply needs), carried along unread."""


@dataclass(frozen=True, slots=True)
class Actor:
    """Who did it."""

    platform: str
    id: str
    """The platform's user id, as text (``1001``, ``U1ADA``, ``5``, a web session's id)."""
    key: str
    """The person across processes (``discord:1001``, ``slack:T1:U1ADA``, ``telegram:5``,
    ``web:<session>``): budgets, cooldowns, run slots and bursts count under it."""
    name: str
    """As traces and "stopped by" show them."""
    admin: bool = False
    """An admin here, as the surface's facts and the policy's lists say."""
    roles: frozenset[str] = frozenset()
    """Their roles here, as text (Discord's role ids; none elsewhere): what
    ``discord.allowed_roles`` lists."""


@dataclass(frozen=True, slots=True)
class Where:
    """Where it happened, in the platform's ids as text.

    ``channel`` is the channel, chat or session; a thread or topic is ``thread`` within it
    (a Discord thread's ``channel`` is its parent, its ``thread`` the thread's own id)."""

    platform: str
    kind: PlaceKind
    channel: str
    space: str | None = None
    """The Discord guild, the Slack team."""
    thread: str | None = None
    """A Discord thread's id, a Slack thread's ts, a Telegram forum topic."""
    category: str | None = None
    name: str = ""
    """The place as people call it (``#general``), when the platform gave its name."""

    @property
    def places(self) -> tuple[str, ...]:
        """What an access list may name: the thread, its channel, the channel's category. A
        Telegram forum topic is not a place of its own: its id is a message id within its
        group, which could equal a listed private chat's id (a user id) and let an unlisted
        group in."""
        thread = None if self.kind == "topic" else self.thread
        return tuple(p for p in (thread, self.channel, self.category) if p)


@dataclass(frozen=True, slots=True, kw_only=True)
class Intent:
    event: str
    """The event's id on its platform, unique: claimed once (a redelivery does nothing)."""
    actor: Actor
    where: Where


@dataclass(frozen=True, slots=True, kw_only=True)
class Ask(Intent, Generic[W]):
    """A question."""

    question: str
    model: str | None = None
    """A catalogue model for this question only (``/ask model:``)."""
    files: Sequence[Incoming] = ()
    earlier: EarlierReader | None = field(default=None, compare=False)
    """Reads the place's earlier messages (a mention where others talked); None: alone."""
    gathers: bool = True
    """Messages: a burst within ``agent.merge_window`` is one question. False for slash
    commands and Retry: a burst may wait four windows, past Discord's and Slack's 3 s ack."""
    memories: MemoryPlace | None = None
    """Where memories are recalled and kept for this question (``core.memories``); None:
    the run neither recalls nor changes them."""
    who: W = field(compare=False)
    """The surface's own record of the event, for its reply (who may ask where is decided
    over ``actor`` and ``where``: ``adapters.dispatch.access``)."""


MemoryAction = Literal["list", "forget", "clear"]
MemoryScope = Literal["me", "channel"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Memory(Intent):
    """``/reactbot memory``, ``/ask-settings memory``, ``/memory``: see or delete what is
    kept about the actor (and about the channel, for its admins)."""

    place: MemoryPlace
    """Where it is asked, as memories read it: what is listed is what is recalled here."""
    action: MemoryAction = "list"
    id: str = ""
    """The memory ``forget`` deletes."""
    scope: MemoryScope = "me"
    """What ``clear`` clears: the actor's own, or the channel's (its admins only)."""


CheckName = Literal["claim", "access", "admin", "admin_in_shared"]
"""The checks a command declares (``adapters.dispatch.commands``): each event once, the
shared access rule (``adapters.dispatch.access``), an admin only, an admin only where the
place is shared."""

ThreadsReader = Callable[[], Awaitable[Sequence[str]]]
"""The threads started within a place (newest first), as the platform lists them: where a
command cannot name a thread (Slack's slash commands), the place's conversations are its
own and its answer threads'."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Reset(Intent):
    """Forget the conversation here: its history and its files (``/reset``)."""

    threads: ThreadsReader | None = field(default=None, compare=False)
    """The answer threads within the place, forgotten with it (Slack); None: none."""
    checks: ClassVar[tuple[CheckName, ...]] = ("claim", "access", "admin_in_shared")


@dataclass(frozen=True, slots=True, kw_only=True)
class ShowTrace(Intent):
    """The last trace of the conversation here (``/trace``)."""

    threads: ThreadsReader | None = field(default=None, compare=False)
    """As ``Reset.threads``: where the place's answers are in threads of their own."""
    checks: ClassVar[tuple[CheckName, ...]] = ("claim", "access")


@dataclass(frozen=True, slots=True, kw_only=True)
class Vote(Intent):
    """👍 or 👎 on a finished answer, kept on its run's trace."""

    run_id: str
    value: Literal["up", "down"]
    checks: ClassVar[tuple[CheckName, ...]] = ("claim", "access")


@dataclass(frozen=True, slots=True)
class ShowSettings:
    """What the place's settings are."""


@dataclass(frozen=True, slots=True)
class SetVerbosity:
    """How much of each run the place sees; None: the platform's default again."""

    level: Verbosity | None


@dataclass(frozen=True, slots=True)
class ShowModels:
    """The models the place may choose (the catalogue)."""


@dataclass(frozen=True, slots=True)
class SetModel:
    """The place's model: a catalogue name; None (``default``): the default model again."""

    name: str | None


@dataclass(frozen=True, slots=True)
class ShowPersona:
    """How long the place's persona is (never its text)."""


@dataclass(frozen=True, slots=True)
class EditPersona:
    """The persona's form opened (Discord's and Slack's): an admin's, as a change is; the
    ``Said`` carries the persona as it is (``Said.form``) for the form to show."""


@dataclass(frozen=True, slots=True)
class SetPersona:
    """The place's persona (a form's text, ``/persona TEXT``); empty clears it."""

    text: str


@dataclass(frozen=True, slots=True)
class ShowTools:
    """The tools on here, and those turned off."""


@dataclass(frozen=True, slots=True)
class ToggleTool:
    """A tool on <-> off here, by its name as typed."""

    name: str


SettingsChange = (
    ShowSettings
    | SetVerbosity
    | ShowModels
    | SetModel
    | ShowPersona
    | EditPersona
    | SetPersona
    | ShowTools
    | ToggleTool
)
SHOWN = (ShowSettings, ShowModels, ShowPersona, ShowTools)
"""The changes that only show: anyone with access; every other one is an admin's."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings(Intent):
    """A place's settings (verbosity, model, persona, tools): shown to anyone with access,
    changed by its admins."""

    change: SettingsChange = ShowSettings()

    @property
    def checks(self) -> tuple[CheckName, ...]:
        if isinstance(self.change, SHOWN):
            return ("claim", "access")
        return ("claim", "access", "admin")


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage(Intent):
    """What the actor used today, against the limits here."""

    checks: ClassVar[tuple[CheckName, ...]] = ("claim", "access")


Command = Reset | ShowTrace | Vote | Settings | Usage
"""The intents that start no run: one handler each (``adapters.dispatch.commands``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPress(Intent):
    """A press on a run's button: its id only says *which* run (a client writes a
    button's data); who may, and from where, is the run's own record's word."""

    run_id: str
    at: Mapping[str, str] | None
    """Where the press came from, as the platform vouches for it, in the keys of the
    surface's ``Reply.where()`` (``{"chat": "42"}``, ``{"channel": "C1"}``,
    ``{"session": "s"}``); None only for a platform's form that only follows a checked
    press (a Slack modal). See ``adapters.decisions.Press``."""

    @property
    def press(self) -> Press:
        return Press(self.actor.id, self.at, admin=self.actor.admin)


@dataclass(frozen=True, slots=True, kw_only=True)
class Stop(RunPress):
    """Stop pressed under a running answer."""


Verdict = Literal["approve", "edit", "deny", "always"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Decide(RunPress):
    """A decision on the action a run waits on: approve, edit (with the new ``input``),
    deny (with a ``reason``, maybe empty) or allow it in this conversation from now on."""

    step: int
    call: int
    verdict: Verdict
    input: str | None = None
    reason: str = ""
    written: bool = False
    """The person wrote the input or the reason (a form, a reply): the ack says so."""

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.run_id, self.step, self.call)


@dataclass(frozen=True, slots=True, kw_only=True)
class Retry(Intent):
    """Retry pressed under an interrupted answer: its question asked again by whoever
    pressed, where they pressed (``Dispatcher.retry``); once per run, however many press."""

    run_id: str
    places: Collection[str]
    """The conversations the press came from, as the platform vouches for them: the run's
    own must be one of them (``adapters.decisions.may_retry``)."""
