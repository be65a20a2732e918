"""Slack files on a message as ``core.files.Incoming``: downloaded from ``url_private`` with
the bot token (``files:read``), which the ``Downloader`` sends to Slack's file host (and the
configured API base URL's origin) only. An audio file or a recorded clip (``subtype``
``slack_audio``) is heard, not read (``adapters.voice``); a clip's ``duration_ms`` is kept
so its length is checked before it is downloaded."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from adapters.downloads import SLACK_FILE_HOSTS, Downloader
from core.files import MB, Incoming

__all__ = ["incoming_of", "slack_downloader"]


def slack_downloader(
    api_base_url: str | None, token: str, *, max_bytes: int = 10 * MB, timeout: float = 30.0
) -> Downloader:
    return Downloader(
        SLACK_FILE_HOSTS,
        api_base_url=api_base_url,
        token=token,
        token_hosts=SLACK_FILE_HOSTS,
        max_bytes=max_bytes,
        timeout=timeout,
        platform="Slack",
    )


def incoming_of(files: Iterable[dict[str, Any]], downloader: Downloader) -> list[Incoming]:
    """A file object's name, size, mimetype and ``url_private_download`` (else
    ``url_private``); one without a URL (``file_access: check_file_info``) is refused by the
    downloader like any URL off Slack's hosts."""
    incoming = []
    for file in files:
        name = str(file.get("name") or file.get("title") or "file")
        url = str(file.get("url_private_download") or file.get("url_private") or "")
        size = file.get("size")
        mimetype = file.get("mimetype")
        millis = file.get("duration_ms")
        incoming.append(
            downloader.incoming(
                name,
                url,
                size=size if isinstance(size, int) else None,
                content_type=mimetype if isinstance(mimetype, str) else None,
                seconds=millis / 1000 if isinstance(millis, int | float) and millis >= 0 else None,
            )
        )
    return incoming
