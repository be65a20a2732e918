"""A conversation's attached files, for any surface: taken in before a run, searched by the
run's ``lookup``, dropped by ``/reset``.

Every surface's files come in here, so the workers' fairness holds across surfaces: one file
of each person (``owner``: the asker's key) is read at a time, other people's go between a
person's several, and ``on_queue`` hears when a file waits its turn (``core.fair``).

A store outage never costs the question: the files are then said to be left out, and the
run goes on with the default tools.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from adapters.channels import RunChoice
from adapters.downloads import Downloader
from adapters.voice import Hearing
from adapters.words import FILES_QUEUED, READING_FILES
from core.errors import StoreUnavailable
from core.files import (
    FileLimits,
    FileReader,
    FileStore,
    Incoming,
    Intake,
    ingest,
    is_image,
    see,
)
from core.knowledge import registry_with_files
from core.tools import ToolRegistry

__all__ = ["STORE_DOWN", "ConversationFiles", "carried"]

log = logging.getLogger(__name__)

STORE_DOWN = "⚠️ The attached files could not be stored right now; I answer without them."


@dataclass(frozen=True, slots=True)
class ConversationFiles:
    store: FileStore
    downloader: Downloader
    limits: FileLimits = field(default_factory=FileLimits)
    reader: FileReader = field(kw_only=True)
    """Reads each file (in a worker process: ``core.file_workers.FileReaders``)."""
    hearing: Hearing = field(kw_only=True, default_factory=Hearing)
    """Hears the voice notes among them before the run (``stt.*``; ``adapters.voice``)."""

    async def take(
        self,
        conversation: str,
        incoming: Sequence[Incoming],
        *,
        vision: bool = False,
        owner: str | None = None,
        on_queue: Callable[[bool], None] | None = None,
    ) -> Intake:
        """Downloads, reads and indexes ``incoming`` (one file of ``owner``'s at a time,
        ``on_queue`` told when one waits its turn); the intake says what was refused. With
        ``vision`` (the run's model reads images), the images are fetched for it too
        (``intake.shown``); else the intake's notice says they are ignored."""
        if not incoming:
            return Intake()
        try:
            intake = await ingest(
                conversation,
                incoming,
                store=self.store,
                limits=self.limits,
                reader=self.reader,
                owner=owner,
                on_queue=on_queue,
            )
        except StoreUnavailable as exc:
            log.warning("files of %s not stored: %s", conversation, exc)
            intake = Intake(refused=[STORE_DOWN])
            intake.images = [i for i in incoming if is_image(i.name, i.content_type)]
        if vision and intake.images:
            await see(intake, max_images=self.limits.max_per_question)
        return intake

    async def prepare(
        self,
        conversation: str,
        incoming: Sequence[Incoming],
        choice: RunChoice,
        default_tools: ToolRegistry,
        *,
        owner: str | None = None,
        say: Callable[[str], None] | None = None,
    ) -> tuple[Intake, ToolRegistry | None]:
        """Before a run: ``incoming`` read into the conversation (images fetched for a model
        that reads them), and the run's tools: the channel's choice (else ``default_tools``)
        with a ``lookup`` that also searches the conversation's files, unless the channel
        turned ``lookup`` off (its files are kept, not searched). None: the agent's own.
        ``owner``: as for ``take``; ``say`` sets the live status while files are read
        ("Reading the attached files", or that they wait their turn)."""
        on_queue = None
        if say is not None and incoming:
            said = say
            said(READING_FILES)

            def on_queue(waits: bool) -> None:
                said(FILES_QUEUED if waits else READING_FILES)

        intake = await self.take(
            conversation, incoming, vision=choice.vision, owner=owner, on_queue=on_queue
        )
        if "lookup" in choice.off:
            return intake, choice.tools
        passages = intake.passages
        if passages is None:  # nothing was read now: the files of earlier questions
            try:
                passages = await self.store.load(conversation)
            except StoreUnavailable as exc:
                log.warning("files of %s not searchable: %s", conversation, exc)
                return intake, choice.tools
        if not passages:
            return intake, choice.tools
        base = choice.tools if choice.tools is not None else default_tools
        return intake, registry_with_files(base, passages)

    async def clear(self, conversation: str) -> bool:
        """Drops the conversation's files; False when the store cannot be reached now."""
        try:
            await self.store.clear(conversation)
        except StoreUnavailable as exc:
            log.warning("files of %s not dropped: %s", conversation, exc)
            return False
        return True


def carried(
    store: FileStore, limits: FileLimits, reader: FileReader, *, platform: str
) -> ConversationFiles:
    """The intake for files that come with their bytes (a local path, a web upload): each
    ``Incoming`` reads its own, and its downloader fetches nothing."""
    nowhere = Downloader(frozenset(), max_bytes=limits.max_bytes, platform=platform)
    return ConversationFiles(store, nowhere, limits, reader=reader)
