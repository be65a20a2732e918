"""``Reset``: the conversation here forgets its history and its files (and, where a command
names no thread, its answer threads do too: ``Reset.threads``)."""

from __future__ import annotations

import dataclasses
import logging

from adapters import words
from adapters.dispatch.conversation import conversation_of
from adapters.dispatch.handlers.services import Services
from adapters.dispatch.intents import Reset, Where
from adapters.dispatch.outcome import Said
from core.errors import StoreUnavailable

log = logging.getLogger(__name__)


async def conversations(where: Where, services: Services, threads: list[str]) -> list[str]:
    """The conversation of ``where``, then those of ``threads`` within it (each once)."""
    found = [conversation_of(where, services.policy)]
    for thread in threads:
        inner = conversation_of(dataclasses.replace(where, thread=thread), services.policy)
        if inner not in found:
            found.append(inner)
    return found


async def handle(intent: Reset, services: Services) -> Said:
    threads = list(await intent.threads()) if intent.threads is not None else []
    try:
        for conversation in await conversations(intent.where, services, threads):
            await services.stores.history.clear(conversation)
            if services.files is not None:
                await services.files.clear(conversation)
    except StoreUnavailable as exc:
        log.warning("reset at %s failed: %s", intent.where.channel, exc)
        return Said(words.UNSAVED)
    return Said(words.RESET_DONE)
