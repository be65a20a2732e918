"""The bot's buttons and forms on Discord: Stop, the decision buttons and their form, Sources,
Retry, the votes, the persona form, and the components-layout card that carries them.

Every button is a ``DynamicItem`` rebuilt from its custom id, so any process may receive a
click; what a press does is the cog's (``Presses``, answered by
``adapters.discord.cog.AskCog``, which decides through the shared dispatcher)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import discord
from discord.ext import commands

from adapters.discord.layout import Card, Rule, SourcesSection, Text
from adapters.discord.payload import DiscordPayload, PendingButtons
from adapters.discord.surface import CardView
from adapters.words import BUTTONS, Label
from core.approval import ApprovalRequest
from core.prompt import PERSONA_CHARS

COG_NAME = "AskCog"
"""The cog that answers presses (``AskCog.__cog_name__``)."""


@runtime_checkable
class Presses(Protocol):
    """What a press is handed to."""

    async def stop_pressed(self, interaction: discord.Interaction, run_id: str) -> None: ...

    async def retry_pressed(self, interaction: discord.Interaction, run_id: str) -> None: ...

    async def sources_pressed(self, interaction: discord.Interaction, run_id: str) -> None: ...

    async def vote_pressed(
        self, interaction: discord.Interaction, run_id: str, vote: Literal["up", "down"]
    ) -> None: ...

    async def decision_pressed(
        self, interaction: discord.Interaction, pressed: Pressed
    ) -> None: ...

    async def modal_submitted(
        self, interaction: discord.Interaction, modal: DecisionModal
    ) -> None: ...

    async def persona_submitted(self, interaction: discord.Interaction, text: str) -> None: ...


STOP_TEMPLATE = r"reactbot:stop:(?P<run>[0-9A-Za-z_-]+):(?P<asker>[0-9]+)"


class StopButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]], template=STOP_TEMPLATE
):
    """Stops the run; only the asker or an admin may press it, others are told so privately.

    Any process may receive the click (it is rebuilt from the custom id); the cog decides.
    """

    def __init__(self, run_id: str, asker_id: int) -> None:
        super().__init__(
            discord.ui.Button(
                label=BUTTONS["stop"].text,
                style=discord.ButtonStyle.danger,
                emoji=BUTTONS["stop"].emoji,
                custom_id=f"reactbot:stop:{run_id}:{asker_id}",
            )
        )
        self.run_id = run_id
        self.asker_id = asker_id

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction,
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> StopButton:
        return cls(match["run"], int(match["asker"]))

    async def callback(self, interaction: discord.Interaction) -> None:
        if (cog := presses_of(interaction)) is not None:
            await cog.stop_pressed(interaction, self.run_id)


# ---- approvals ------------------------------------------------------------------------------

DECIDE_TEMPLATE = (
    r"reactbot:decide:(?P<run>[0-9A-Za-z_-]+):(?P<step>[0-9]{1,4}):(?P<call>[0-9]{1,3})"
    r":(?P<verdict>approve|edit|deny|always):(?P<asker>[0-9]+)"
)
_VERDICT_BUTTONS: tuple[tuple[str, Label, discord.ButtonStyle], ...] = (
    ("approve", BUTTONS["approve"], discord.ButtonStyle.success),
    ("edit", BUTTONS["edit"], discord.ButtonStyle.primary),
    ("deny", BUTTONS["deny"], discord.ButtonStyle.secondary),
    ("always", BUTTONS["always"], discord.ButtonStyle.secondary),
)


@dataclass(frozen=True, slots=True)
class Pressed:
    """A decision button, read back from its custom id (on whichever process got it)."""

    run_id: str
    step: int
    call: int
    verdict: str
    asker_id: int

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.run_id, self.step, self.call)


class DecisionButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]], template=DECIDE_TEMPLATE
):
    """Approve, Edit…, Deny or Allow in this conversation, for one pending action."""

    def __init__(
        self, pressed: Pressed, label: Label | None = None, style: discord.ButtonStyle | None = None
    ) -> None:
        custom_id = (
            f"reactbot:decide:{pressed.run_id}:{pressed.step}:{pressed.call}:"
            f"{pressed.verdict}:{pressed.asker_id}"
        )
        button: discord.ui.Button[discord.ui.View] = discord.ui.Button(
            label=label.text if label else pressed.verdict,
            emoji=label.emoji if label else None,
            style=style or discord.ButtonStyle.secondary,
            custom_id=custom_id,
        )
        super().__init__(button)
        self.pressed = pressed

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction,
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> DecisionButton:
        step, call, asker = int(match["step"]), int(match["call"]), int(match["asker"])
        return cls(Pressed(match["run"], step, call, match["verdict"], asker))

    async def callback(self, interaction: discord.Interaction) -> None:
        cog = presses_of(interaction)
        if cog is not None:
            await cog.decision_pressed(interaction, self.pressed)


def presses_of(interaction: discord.Interaction) -> Presses | None:
    """The cog that answers presses, on the client the interaction came to (any process may
    receive a click: every button is rebuilt from its custom id)."""
    client = interaction.client
    bots = (commands.Bot, commands.AutoShardedBot)  # the latter is no subclass of Bot
    cog = client.get_cog(COG_NAME) if isinstance(client, bots) else None
    return cog if isinstance(cog, Presses) else None


def controls(run_id: str, asker_id: int, pending: PendingButtons | None) -> discord.ui.View:
    """The message's buttons: Stop, and the decision buttons while an action is pending."""
    view = discord.ui.View(timeout=None)
    if pending is not None:
        for verdict, label, style in _VERDICT_BUTTONS:
            if verdict == "always" and not pending.remember:
                continue
            pressed = Pressed(run_id, pending.step, pending.call, verdict, asker_id)
            view.add_item(DecisionButton(pressed, label, style))
    view.add_item(StopButton(run_id, asker_id))
    return view


class PersonaModal(discord.ui.Modal, title="This channel's persona"):
    """The persona as it is, to edit; empty clears it. Its submission is only translated
    (``SetPersona``, for the channel it is submitted in): who may, and the reply, are the
    shared handlers'."""

    def __init__(self, cog: Presses, current: str) -> None:
        super().__init__(timeout=600, custom_id="reactbot:persona")
        self.cog = cog
        self.text: discord.ui.TextInput[PersonaModal] = discord.ui.TextInput(
            custom_id="persona",
            label="Persona (below the core instructions)",
            style=discord.TextStyle.paragraph,
            default=current[:PERSONA_CHARS] or None,
            required=False,
            max_length=PERSONA_CHARS,
            placeholder="Tone, focus, language… Empty: no persona.",
        )
        self.add_item(self.text)

    async def on_submit(self, interaction: discord.Interaction) -> None:
        await self.cog.persona_submitted(interaction, self.text.value or "")


# ---- the components layout ------------------------------------------------------------------

SOURCES_TEMPLATE = r"reactbot:sources:(?P<run>[0-9A-Za-z_-]+)"


class SourcesButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.LayoutView]], template=SOURCES_TEMPLATE
):
    """On a finished card: lists the run's cited links to whoever presses it, privately."""

    def __init__(self, run_id: str) -> None:
        super().__init__(
            discord.ui.Button(
                label=BUTTONS["sources"].text,
                style=discord.ButtonStyle.secondary,
                emoji=BUTTONS["sources"].emoji,
                custom_id=f"reactbot:sources:{run_id}",
            )
        )
        self.run_id = run_id

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction,
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> SourcesButton:
        return cls(match["run"])

    async def callback(self, interaction: discord.Interaction) -> None:
        cog = presses_of(interaction)
        if cog is not None:
            await cog.sources_pressed(interaction, self.run_id)


RETRY_TEMPLATE = r"reactbot:retry:(?P<run>[0-9A-Za-z_-]+)"


class RetryButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=RETRY_TEMPLATE):
    """On an answer a restart interrupted: asks its question again, as whoever presses it
    (admitted like any question), in a new reply."""

    def __init__(self, run_id: str) -> None:
        super().__init__(
            discord.ui.Button(
                label=BUTTONS["retry"].text,
                style=discord.ButtonStyle.primary,
                emoji=BUTTONS["retry"].emoji,
                custom_id=f"reactbot:retry:{run_id}",
            )
        )
        self.run_id = run_id

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction,
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> RetryButton:
        return cls(match["run"])

    async def callback(self, interaction: discord.Interaction) -> None:
        cog = presses_of(interaction)
        if cog is not None:
            await cog.retry_pressed(interaction, self.run_id)


VOTE_TEMPLATE = r"reactbot:vote:(?P<vote>up|down):(?P<run>[0-9A-Za-z_-]+)"


class VoteButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=VOTE_TEMPLATE):
    """👍 or 👎 under a finished answer: anyone may vote, once each (a new vote replaces
    theirs), recorded on the run's trace; the voter alone is told it was."""

    def __init__(self, vote: Literal["up", "down"], run_id: str) -> None:
        super().__init__(
            discord.ui.Button(
                emoji=BUTTONS[vote].emoji,
                style=discord.ButtonStyle.secondary,
                custom_id=f"reactbot:vote:{vote}:{run_id}",
            )
        )
        self.vote: Literal["up", "down"] = vote
        self.run_id = run_id

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction,
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> VoteButton:
        return cls("up" if match["vote"] == "up" else "down", match["run"])

    async def callback(self, interaction: discord.Interaction) -> None:
        cog = presses_of(interaction)
        if cog is not None:
            await cog.vote_pressed(interaction, self.run_id, self.vote)


def vote_buttons(run_id: str) -> list[VoteButton]:
    return [VoteButton("up", run_id), VoteButton("down", run_id)]


def votes_view(run_id: str) -> discord.ui.View:
    """The text layout's buttons on a finished answer: 👍 and 👎."""
    view = discord.ui.View(timeout=None)
    for button in vote_buttons(run_id):
        view.add_item(button)
    return view


def card_view(
    run_id: str,
    asker_id: int,
    payload: DiscordPayload,
    *,
    sets_flag: bool = True,
    extra: Sequence[discord.ui.Item[Any]] = (),
) -> CardView:
    """A card as discord.py's LayoutView: one Container (its accent colour the phase), a
    TextDisplay or Separator per block, a Section with the Sources button, a File component
    per attachment (a Components V2 message shows only the files it names), and an ActionRow
    with the decision buttons and Stop."""
    card = payload.card or Card(None, (Text(payload.content or "…"),))
    items: list[discord.ui.Item[Any]] = []
    for block in card.blocks:
        match block:
            case Text(content=content):
                items.append(discord.ui.TextDisplay(content))
            case Rule(large=large):
                spacing = (
                    discord.SeparatorSpacing.large if large else discord.SeparatorSpacing.small
                )
                items.append(discord.ui.Separator(spacing=spacing))
            case SourcesSection(content=content):
                text = discord.ui.TextDisplay[Any](content)
                items.append(discord.ui.Section(text, accessory=SourcesButton(run_id)))
    items += [discord.ui.File(f"attachment://{f.name}") for f in payload.files]
    buttons: list[discord.ui.Item[Any]] = []
    pending = payload.approval
    if pending is not None:
        for verdict, label, style in _VERDICT_BUTTONS:
            if verdict == "always" and not pending.remember:
                continue
            pressed = Pressed(run_id, pending.step, pending.call, verdict, asker_id)
            buttons.append(DecisionButton(pressed, label, style))
    if payload.stop_button != "remove":
        buttons.append(StopButton(run_id, asker_id))
    if payload.votes:
        buttons += vote_buttons(run_id)
    buttons += extra
    if buttons:
        items.append(discord.ui.ActionRow(*buttons))
    view = CardView(sets_flag=sets_flag)
    view.add_item(discord.ui.Container(*items, accent_colour=card.accent))
    return view


class DecisionModal(discord.ui.Modal):
    """Edit the input (prefilled; JSON for a tool with several arguments), or say why not."""

    def __init__(self, cog: Presses, pressed: Pressed, request: ApprovalRequest | None) -> None:
        editing = pressed.verdict == "edit" and request is not None
        title = f"Edit the input to {request.name}" if editing and request else "Deny this action"
        super().__init__(
            title=title[:45],
            custom_id=f"reactbot:modal:{pressed.run_id}:{pressed.step}:{pressed.call}"[:100],
            timeout=None,
        )
        self.cog = cog
        self.pressed = pressed
        self.request = request
        self.edited: discord.ui.TextInput[DecisionModal] | None = None
        if editing and request is not None:
            self.edited = discord.ui.TextInput(
                style=discord.TextStyle.paragraph,
                custom_id="input",
                default=request.input[:4000],
                max_length=4000,
            )
            hint = "A JSON object." if request.json_input else None
            self.add_item(discord.ui.Label(text="Input", description=hint, component=self.edited))
        self.reason: discord.ui.TextInput[DecisionModal] = discord.ui.TextInput(
            style=discord.TextStyle.paragraph, custom_id="reason", required=False, max_length=500
        )
        self.add_item(discord.ui.Label(text="Reason (optional)", component=self.reason))

    async def on_submit(self, interaction: discord.Interaction) -> None:
        await self.cog.modal_submitted(interaction, self)
