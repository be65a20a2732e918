"""``Usage``: what the actor used today, against the limits of the place (an admin is told
they are not limited)."""

from __future__ import annotations

from adapters.dispatch.conversation import settings_place
from adapters.dispatch.handlers.services import Services
from adapters.dispatch.intents import Usage
from adapters.dispatch.outcome import Said
from core.budgets import UNREADABLE


async def handle(intent: Usage, services: Services) -> Said:
    actor = intent.actor
    text = await services.budgets.report(actor.key, settings_place(intent.where), admin=actor.admin)
    return Said(f"⚠️ {text}" if text == UNREADABLE else text)
