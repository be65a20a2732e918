"""A place's model, persona and tools as ``Settings`` intents (``adapters.dispatch.handlers.
settings``): who may, what is kept, and what is said when it cannot be: an unknown name, a
persona too long, hostile text, the store away. The surfaces' tests and the conformance
table show the same through the real SDKs; these pin the rules."""

from __future__ import annotations

import pytest

from adapters import words
from adapters.channels import ChannelChoices
from adapters.dispatch.access import Access
from adapters.dispatch.commands import Commands
from adapters.dispatch.handlers.services import Services
from adapters.dispatch.intents import (
    Actor,
    EditPersona,
    SetModel,
    SetPersona,
    Settings,
    SettingsChange,
    ShowModels,
    ShowPersona,
    ShowTools,
    ToggleTool,
    Where,
)
from adapters.dispatch.outcome import Refusal, Said
from adapters.policy import Policy
from core.budgets import InMemoryUsageCounters, TokenBudgets
from core.errors import StoreUnavailable
from core.prompt import PERSONA_CHARS
from core.scripted import ScriptedModel
from core.stores import InMemoryChannelSettings, Stores
from core.tools import ToolRegistry
from core.tools.calculator import CalculatorTool

ANN = Actor("telegram", "5", "telegram:5", "ann")
ADMIN = Actor("telegram", "9", "telegram:9", "mod", admin=True)
GROUP = Where("telegram", "channel", "-100")
PLACE = "telegram:-100"


class Down(InMemoryChannelSettings):
    async def get(self, channel: str) -> dict[str, str]:
        raise StoreUnavailable("Redis at 127.0.0.1:1 failed to read the channel's settings")

    async def put(self, channel: str, name: str, value: str | None) -> None:
        raise StoreUnavailable("Redis at 127.0.0.1:1 failed to save the channel's settings")


def commands(settings: InMemoryChannelSettings | None = None) -> Commands:
    stores = Stores.in_memory()
    tools = ToolRegistry()
    tools.add(CalculatorTool())
    choices = ChannelChoices(settings or stores.channel_settings, {"big": ScriptedModel([])}, tools)
    budgets = TokenBudgets(InMemoryUsageCounters())
    policy = Policy("telegram")
    services = Services(policy, stores, budgets, choices)
    return Commands(services, access=Access(policy))


class Asking:
    def __init__(self, handlers: Commands) -> None:
        self.handlers, self.n = handlers, 0

    async def __call__(self, actor: Actor, change: SettingsChange) -> Refusal | Said:
        self.n += 1
        intent = Settings(event=f"e{self.n}", actor=actor, where=GROUP, change=change)
        outcome = await self.handlers.dispatch(intent)
        assert isinstance(outcome, Refusal | Said)
        return outcome


@pytest.mark.parametrize(
    "change", [SetModel("big"), SetPersona("Be brief."), ToggleTool("calculate"), EditPersona()]
)
async def test_every_change_and_the_persona_form_are_an_admins(change: SettingsChange) -> None:
    ask = Asking(commands())
    assert await ask(ANN, change) == Refusal("who", words.ONLY_ADMINS)
    assert isinstance(await ask(ADMIN, change), Said)


async def test_anyone_sees_them_and_an_admins_changes_are_kept_in_the_shared_words() -> None:
    handlers = commands()
    choices = handlers.services.choices
    ask = Asking(handlers)
    assert await ask(ANN, ShowModels()) == Said(words.models_line(["big"]))
    assert await ask(ANN, ShowTools()) == Said(words.tools_line(["calculate"], []))
    assert await ask(ANN, ShowPersona()) == Said(words.persona_shown(0))
    assert await ask(ADMIN, SetModel("big")) == Said(words.model_set("big"))
    assert await ask(ADMIN, ToggleTool(" Calculate ")) == Said(words.tool_now("calculate", False))
    assert await ask(ANN, ShowTools()) == Said(words.tools_line([], ["calculate"]))
    assert await ask(ADMIN, SetPersona("  Be brief.\x00\x07  ")) == Said(words.persona_set(9))
    assert await ask(ANN, ShowPersona()) == Said(words.persona_shown(9)), "its length, not text"
    assert await ask(ADMIN, EditPersona()) == Said("", form="Be brief.")
    run = await choices.for_run(PLACE)
    assert run.model is choices.catalogue["big"] and run.persona == "Be brief."
    assert run.off == frozenset({"calculate"})
    assert await ask(ADMIN, SetModel(None)) == Said(words.model_set(None))
    assert await ask(ADMIN, SetPersona("")) == Said(words.PERSONA_CLEARED)
    assert (await choices.for_run(PLACE)).model is None


async def test_what_cannot_be_chosen_is_said_bounded_and_inert_and_nothing_changes() -> None:
    handlers = commands()
    ask = Asking(handlers)
    await ask(ADMIN, SetPersona("Be brief."))
    hostile = "<@U1> <!channel> @everyone **x** `y` \u202e\x00" + "ω" * 10_000
    for change, start in (
        (SetModel(hostile), "⚠️ There is no model named '"),
        (ToggleTool(hostile), "⚠️ There is no tool named '"),
    ):
        said = await ask(ADMIN, change)
        assert isinstance(said, Said) and said.failed and said.text.startswith(start)
        assert len(said.text) < 300
        shown = said.text.removeprefix(start).partition("'")[0]  # the name as typed
        assert shown.startswith("U1 !channel everyone x y ω") and len(shown) <= words.NAME_SHOWN
        assert not any(c in said.text for c in "<>@\u202e\x00")
    huge = ("Ωмир漢字🙂\x07\u202e " * 12_500)[:100_000]
    said = await ask(ADMIN, SetPersona(huge))
    assert isinstance(said, Said) and said.failed and len(said.text) < 120
    assert said.text.startswith("⚠️ The persona is") and f"{PERSONA_CHARS:,}" in said.text
    stored = await handlers.services.choices.settings.get(PLACE)
    assert stored == {"prompt": "Be brief."}, "nothing changed"


async def test_with_the_store_away_each_change_says_so_and_the_form_does_not_open() -> None:
    ask = Asking(commands(Down()))
    for change in (SetModel("big"), SetPersona("Be brief."), ToggleTool("calculate")):
        assert await ask(ADMIN, change) == Said(words.UNSAVED, failed=True)
    assert await ask(ADMIN, EditPersona()) == Said(words.STORE_AWAY, failed=True)
