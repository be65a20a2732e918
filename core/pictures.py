"""Pictures a tool returned (an MCP tool's image content), to attach to the answer.

A tool's image reaches the run as an ``Attachment`` (base64, its claimed type); the model
sees only a placeholder line (``[image: image/png, 1.0 KB]``), never the bytes. The trace
keeps the bytes (within ``agent``'s ``attachment_max_bytes``, which is ``files.max_bytes``,
and the trace's own room) and lists each. ``pictures_of`` takes them back out for the
surfaces, each one checked by its bytes, not its claimed type: PNG, JPEG, WEBP or GIF, the
kinds every surface shows inline; anything else stays in the trace only.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from core.trace import Trace

__all__ = ["MAX_PICTURES", "Picture", "picture_type", "pictures_of"]

MAX_PICTURES = 4
"""Pictures attached to one answer; the others stay in the trace."""

_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}


@dataclass(frozen=True, slots=True)
class Picture:
    name: str
    """``picture-1.png``: numbered, the extension its bytes say (never the tool's name)."""
    mime_type: str
    data: bytes


def picture_type(data: bytes) -> str | None:
    """The image type ``data`` starts as (its magic bytes), or None for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    return None


def pictures_of(trace: Trace, *, limit: int = MAX_PICTURES) -> list[Picture]:
    """The images the run's tools returned and the trace kept, in order, at most ``limit``."""
    pictures: list[Picture] = []
    for step in trace.steps:
        for attachment in step.attachments:
            if len(pictures) >= limit:
                return pictures
            if attachment.data is None or not attachment.mime_type.startswith("image/"):
                continue
            data = _decoded(attachment.data)
            kind = picture_type(data) if data is not None else None
            if data is None or kind is None:
                continue
            pictures.append(Picture(f"picture-{len(pictures) + 1}.{_EXTENSIONS[kind]}", kind, data))
    return pictures


def _decoded(data: str) -> bytes | None:
    body = data.split(",", 1)[1] if data.startswith("data:") else data
    try:
        return base64.b64decode(body, validate=False)
    except (binascii.Error, ValueError):
        return None
