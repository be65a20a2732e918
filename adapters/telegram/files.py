"""Documents and photos on a Telegram question as ``core.files.Incoming``, and "typing…"
while they are read.

A Telegram message carries a ``file_id``, not a URL. Fetching one is two steps, both taken
only when ``core.files.ingest`` decides to read the file (its kind and declared size passed
``files.*`` first): ``getFile`` gives a ``file_path``, which python-telegram-bot turns into
``<base_file_url><token>/<file_path>``, the file host beside the configured API
(``telegram.api_base_url``'s ``…/bot`` becomes ``…/file/bot``). The bytes are then fetched by
the shared ``Downloader`` (streamed, stopped at ``files.max_bytes``, no redirect off the
API's origin), never by python-telegram-bot's unbounded ``File.download_*`` (which would also
read a *local* path a local Bot API server names). A ``file_path`` that does not lead to that
file host is refused. Telegram hands bots files of at most 20 MB: a bigger one is refused by
``getFile`` ("file is too big"), and said so.

A photo comes in several sizes: the largest within ``files.max_bytes`` is read (JPEG).

Voice notes (``voice``: Ogg/Opus, ``.oga``), audio files (``audio``) and round videos
(``video_note``: MP4) come with their ``duration`` in seconds: they are heard, not read
(``adapters.voice``), fetched the same way once their size and length passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import timedelta
from urllib.parse import quote

from telegram import Audio, Bot, Document, Message, PhotoSize, VideoNote, Voice
from telegram.constants import ChatAction
from telegram.error import BadRequest, TelegramError
from telegram.ext import filters

from adapters.downloads import Downloader
from adapters.tasks import alongside
from core.files import MB, FileRefused, Incoming, safe_name

__all__ = ["HEARD", "TYPING_EVERY", "TelegramFiles", "telegram_downloader", "typing"]

log = logging.getLogger(__name__)

HEARD = filters.VOICE | filters.AUDIO | filters.VIDEO_NOTE
"""Messages heard as questions (``adapters.voice``), with or without a caption."""
BOT_FILE_LIMIT = 20 * MB
"""What ``getFile`` hands a bot (the Bot API: "files of up to 20MB in size")."""
TYPING_EVERY = 4.5
"""Seconds between two ``sendChatAction typing``: Telegram shows one for 5 s (or until the
bot's next message)."""


def telegram_downloader(
    api_base_url: str, *, max_bytes: int = 10 * MB, timeout: float = 30.0
) -> Downloader:
    """Downloads from the configured API's origin only (``api.telegram.org`` by default,
    where its file host is); no ``Authorization`` header (the token is in the path)."""
    return Downloader(
        frozenset(),
        api_base_url=api_base_url,
        max_bytes=max_bytes,
        timeout=timeout,
        platform="Telegram",
    )


class TelegramFiles:
    """A message's document and photo, read through one bot's ``getFile``."""

    def __init__(self, bot: Bot, downloader: Downloader) -> None:
        self.bot = bot
        self.downloader = downloader

    def incoming(self, message: Message) -> list[Incoming]:
        found: list[Incoming] = []
        if (document := message.document) is not None:
            found.append(self._document(document))
        if message.photo:
            found.append(self._photo(message.photo))
        if (note := message.voice or message.audio or message.video_note) is not None:
            found.append(self._timed(note))
        return found

    def _timed(self, note: Voice | Audio | VideoNote) -> Incoming:
        """A voice note, an audio file or a round video, with the length Telegram gave."""
        kind: str | None
        if isinstance(note, VideoNote):
            name, kind = f"round-video-{note.file_unique_id}.mp4", "video/mp4"
        elif isinstance(note, Audio) and note.file_name:
            name, kind = note.file_name, note.mime_type
        else:
            name, kind = f"voice-{note.file_unique_id}.oga", note.mime_type or "audio/ogg"
        item = self._incoming(note.file_id, name, note.file_size, kind)
        length = note.duration  # an int of seconds, or a timedelta (python-telegram-bot 22)
        seconds = length.total_seconds() if isinstance(length, timedelta) else float(length)
        return replace(item, seconds=seconds)

    def _document(self, document: Document) -> Incoming:
        name = document.file_name or f"document-{document.file_unique_id}"
        return self._incoming(document.file_id, name, document.file_size, document.mime_type)

    def _photo(self, sizes: Sequence[PhotoSize]) -> Incoming:
        """The largest size that fits ``files.max_bytes`` (else the smallest, refused by
        its size)."""
        by_size = sorted(sizes, key=lambda s: (s.file_size or 0, s.width * s.height))
        fitting = [s for s in by_size if (s.file_size or 0) <= self.downloader.max_bytes]
        chosen = fitting[-1] if fitting else by_size[0]
        name = f"photo-{chosen.file_unique_id}.jpg"
        return self._incoming(chosen.file_id, name, chosen.file_size, "image/jpeg")

    def _incoming(
        self, file_id: str, name: str, size: int | None, content_type: str | None
    ) -> Incoming:
        async def fetch() -> bytes:
            return await self.fetch(file_id, name=name)

        return Incoming(name, size, content_type, f"telegram-file:{file_id}", fetch)

    async def fetch(self, file_id: str, *, name: str) -> bytes:
        """``getFile``, then the bytes from Telegram's file host; ``FileRefused`` with the
        line the person sees otherwise."""
        shown = safe_name(name)
        try:
            file = await self.bot.get_file(file_id)
        except BadRequest as exc:
            if "file is too big" in exc.message.lower():
                raise FileRefused(
                    f"{shown}: Telegram gives bots files of at most 20 MB; this one is larger."
                ) from exc
            raise FileRefused(f"{shown}: Telegram refused it ({exc.message[:100]}).") from exc
        except TelegramError as exc:
            raise FileRefused(
                f"{shown}: Telegram did not hand it over ({type(exc).__name__})."
            ) from exc
        host = self.bot.base_file_url + "/"
        path = (file.file_path or "").removeprefix(host)
        if not file.file_path or path == file.file_path or ".." in path.split("/"):
            log.warning("file %s: getFile named no path on Telegram's file host", file_id)
            raise FileRefused(f"{shown}: not downloaded, it is not on Telegram's file host.")
        return await self.downloader.fetch(host + quote(path), name=name)


@contextlib.asynccontextmanager
async def typing(
    bot: Bot, chat: int, thread: int | None = None, *, every: float = TYPING_EVERY
) -> AsyncIterator[None]:
    """ "typing…" in ``chat`` (its forum topic) while the block runs, renewed every
    ``every`` seconds; best effort: a refused action is logged and the work goes on."""

    async def keep() -> None:
        while True:
            try:
                await bot.send_chat_action(chat, ChatAction.TYPING, message_thread_id=thread)
            except TelegramError as exc:
                log.warning("could not show typing in chat %s: %s", chat, exc)
            await asyncio.sleep(every)

    async with alongside(keep(), name=f"typing:{chat}"):
        yield
