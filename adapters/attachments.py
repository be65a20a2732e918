"""A conversation's attached files, for any surface: taken in before a run, searched by the
run's ``lookup``, dropped by ``/reset``.

A store outage never costs the question: the files are then said to be left out, and the
run goes on with the default tools.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from adapters.downloads import Downloader
from core.errors import StoreUnavailable
from core.files import (
    FileLimits,
    FileStore,
    Incoming,
    Intake,
    ingest,
    is_image,
    registry_with_files,
    see,
)
from core.tools import ToolRegistry

__all__ = ["STORE_DOWN", "ConversationFiles"]

log = logging.getLogger(__name__)

STORE_DOWN = "⚠️ The attached files could not be stored right now; I answer without them."


@dataclass(frozen=True, slots=True)
class ConversationFiles:
    store: FileStore
    downloader: Downloader
    limits: FileLimits = field(default_factory=FileLimits)

    async def take(
        self, conversation: str, incoming: Sequence[Incoming], *, vision: bool = False
    ) -> Intake:
        """Downloads, reads and indexes ``incoming``; the intake says what was refused. With
        ``vision`` (the run's model reads images), the images are fetched for it too
        (``intake.shown``); else the intake's notice says they are ignored."""
        if not incoming:
            return Intake()
        try:
            intake = await ingest(conversation, incoming, store=self.store, limits=self.limits)
        except StoreUnavailable as exc:
            log.warning("files of %s not stored: %s", conversation, exc)
            intake = Intake(refused=[STORE_DOWN])
            intake.images = [i for i in incoming if is_image(i.name, i.content_type)]
        if vision and intake.images:
            await see(intake, max_images=self.limits.max_per_question)
        return intake

    async def tools_for(
        self, conversation: str, base: ToolRegistry, *, lookup_off: bool = False
    ) -> ToolRegistry | None:
        """``base`` with a ``lookup`` that also searches the conversation's files; None when
        the conversation has none (or they cannot be read now), or when the channel turned
        ``lookup`` off (its files are kept, not searched): the run keeps ``base``."""
        if lookup_off:
            return None
        try:
            passages = await self.store.load(conversation)
        except StoreUnavailable as exc:
            log.warning("files of %s not searchable: %s", conversation, exc)
            return None
        return registry_with_files(base, passages) if passages else None

    async def clear(self, conversation: str) -> bool:
        """Drops the conversation's files; False when the store cannot be reached now."""
        try:
            await self.store.clear(conversation)
        except StoreUnavailable as exc:
            log.warning("files of %s not dropped: %s", conversation, exc)
            return False
        return True
