"""``Settings``: a place's settings shown, and its verbosity, model, persona and tools
changed (its admins: the check is declared on the intent), in the shared words on every
surface.

A change that cannot be made is said, and nothing changes: a name that is not in the
catalogue or the tool registry (``ChoiceError``, its words ``adapters.words``'), a persona
over ``core.prompt.PERSONA_CHARS``, the shared store away (``StoreUnavailable``: the place
keeps what it had). Such a ``Said`` is ``failed``, so a form it came from stays open.
"""

from __future__ import annotations

from typing import assert_never

from adapters import words
from adapters.channels import ChoiceError
from adapters.dispatch.conversation import settings_place
from adapters.dispatch.handlers.services import Services
from adapters.dispatch.intents import (
    EditPersona,
    SetModel,
    SetPersona,
    Settings,
    SetVerbosity,
    ShowModels,
    ShowPersona,
    ShowSettings,
    ShowTools,
    ToggleTool,
)
from adapters.dispatch.outcome import Said
from core.errors import StoreUnavailable


async def handle(intent: Settings, services: Services) -> Said:
    place, choices, change = settings_place(intent.where), services.choices, intent.change
    match change:
        case ShowSettings():
            return Said("\n".join(await choices.describe(place, services.policy.verbosity)))
        case ShowModels():
            return Said(choices.choices())
        case ShowPersona():
            return Said(words.persona_shown(len(await choices.persona(place))))
        case ShowTools():
            return Said(await choices.tools_line(place))
        case EditPersona():
            try:  # the form shows what is kept; it cannot, with the store away
                current = (await choices.settings.get(place)).get("prompt", "")
            except StoreUnavailable:
                return Said(words.STORE_AWAY, failed=True)
            return Said("", form=current)
        case SetVerbosity() | SetModel() | SetPersona() | ToggleTool():
            return await _change(change, place, services)
        case _:
            assert_never(change)


async def _change(
    change: SetVerbosity | SetModel | SetPersona | ToggleTool, place: str, services: Services
) -> Said:
    choices = services.choices
    try:
        match change:
            case SetVerbosity(level):
                await services.stores.channel_settings.put(place, "verbosity", level)
                shown = level or words.by_default(services.policy.verbosity)
                return Said(words.now_sees(f"**{shown}**"))
            case SetModel(name):
                return Said(await choices.set_model(place, name))
            case SetPersona(text):
                return Said(await choices.set_persona(place, text))
            case ToggleTool(name):
                return Said(await choices.toggle_tool(place, name))
            case _:
                assert_never(change)
    except ChoiceError as exc:
        return Said(words.choice_refused(str(exc)), failed=True)
    except StoreUnavailable:
        return Said(words.UNSAVED, failed=True)
