"""Discord attachments as ``core.files.Incoming``: the attachment's own name, declared size,
content type and CDN URL (downloaded only through the ``Downloader``, never discord.py's
unbounded ``Attachment.read``). A voice message is an ``audio/ogg`` attachment
(``voice-message.ogg``) whose flags carry ``IS_VOICE_MESSAGE`` (1 << 13), with its
``duration_secs`` and ``waveform``: the length is kept, so it is checked before download."""

from __future__ import annotations

from collections.abc import Sequence

import discord

from adapters.downloads import DISCORD_FILE_HOSTS, Downloader
from core.files import MB, Incoming

__all__ = ["discord_downloader", "incoming_of"]


def discord_downloader(
    api_base_url: str | None, *, max_bytes: int = 10 * MB, timeout: float = 30.0
) -> Downloader:
    """Discord's CDN hosts, plus the API base URL's origin; no token (the CDN needs none)."""
    return Downloader(
        DISCORD_FILE_HOSTS,
        api_base_url=api_base_url,
        max_bytes=max_bytes,
        timeout=timeout,
        platform="Discord",
    )


def incoming_of(
    attachments: Sequence[discord.Attachment], downloader: Downloader
) -> list[Incoming]:
    return [
        downloader.incoming(
            a.filename,
            a.url,
            size=a.size,
            content_type=a.content_type,
            seconds=a.duration if a.is_voice_message() else None,
        )
        for a in attachments
    ]
