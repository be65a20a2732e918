"""``Settings``: the place's settings shown (anyone with access), its verbosity changed (its
admins: the check is declared on the intent)."""

from __future__ import annotations

from adapters import words
from adapters.dispatch.conversation import settings_place
from adapters.dispatch.handlers.services import Services
from adapters.dispatch.intents import Settings, ShowSettings
from adapters.dispatch.outcome import Said
from core.errors import StoreUnavailable


async def handle(intent: Settings, services: Services) -> Said:
    place, default = settings_place(intent.where), services.policy.verbosity
    if isinstance(intent.change, ShowSettings):
        return Said("\n".join(await services.choices.describe(place, default)))
    level = intent.change.level
    try:
        await services.stores.channel_settings.put(place, "verbosity", level)
    except StoreUnavailable:
        return Said(words.UNSAVED)
    return Said(words.now_sees(f"**{level or words.by_default(default)}**"))
