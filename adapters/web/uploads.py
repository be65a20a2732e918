"""Files attached in the web chat: ``POST /api/ask`` as ``multipart/form-data`` (a
``question`` part and ``file`` parts), read as the request streams in, each file becoming a
``core.files.Incoming`` whose "download" is the bytes already received.

Nothing else is special about them: the question is admitted like any other, and its files
are read inside its run (its live message and Stop shown meanwhile) by the intake every
surface uses (``adapters.attachments.ConversationFiles``): the same ``files.*`` limits, the
same worker processes and fair queue, the same refusal lines.

Bounded before and while reading: the declared length must fit ``files.max_per_question``
files of ``files.max_bytes`` (plus the question), and so must the bytes that come; a file
past ``files.max_bytes`` is counted, not kept (the intake refuses it by its size, in its
usual words); files past the number a question may carry are named, not kept; at most
``MAX_UPLOADS`` uploads are read at once by the process. A file's name is the browser's
claim and its content anyone's: both go to the intake as they are (``safe_name``, worker
processes), and the page shows names with ``textContent`` only.
"""

from __future__ import annotations

import json

from aiohttp import BodyPartReader, web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.multipart import BadContentDispositionHeader, BadContentDispositionParam

from adapters import words
from core.files import FileLimits, Incoming, size_text

__all__ = ["MAX_UPLOADS", "Uploads"]

MAX_UPLOADS = 4
"""Uploads the process reads at once; one more is told to try again (503)."""
QUESTION_BYTES = 64 * 1024
"""The ``question`` part, as bounded as a JSON request's whole body."""
CHUNK = 64 * 1024
NOT_A_FORM = (
    ValueError,
    HttpProcessingError,
    # aiohttp's warnings for a garbled part header: errors where warnings are (tests)
    BadContentDispositionHeader,
    BadContentDispositionParam,
)


class Uploads:
    """Reads one ask's multipart body into its question and its files (``files`` None: the
    chat takes no files, ``files.enabled: false``, and says so)."""

    def __init__(self, limits: FileLimits | None, headers: dict[str, str]) -> None:
        self.limits = limits
        self._headers = headers
        self._reading = 0

    async def read(self, request: web.Request) -> dict[str, object]:
        """``{"question": str, "id": str, "files": tuple[Incoming, ...]}``; an HTTP error with the
        line the page shows otherwise."""
        limits = self.limits
        if limits is None:
            raise self._refused(web.HTTPBadRequest, words.FILES_OFF)
        most = limits.max_per_question * limits.max_bytes + QUESTION_BYTES + CHUNK
        if request.content_length is None or request.content_length > most:
            raise web.HTTPRequestEntityTooLarge(
                most,
                request.content_length or 0,
                text=json.dumps(
                    {
                        "error": words.upload_too_big(
                            limits.max_per_question, size_text(limits.max_bytes)
                        )
                    }
                ),
                content_type="application/json",
                headers=self._headers,
            )
        if self._reading >= MAX_UPLOADS:
            raise self._refused(web.HTTPServiceUnavailable, words.UPLOADS_BUSY)
        self._reading += 1
        try:
            return await self._parts(request, limits)
        except NOT_A_FORM as exc:
            raise self._refused(web.HTTPBadRequest, words.NOT_A_FORM) from exc
        finally:
            self._reading -= 1

    async def _parts(self, request: web.Request, limits: FileLimits) -> dict[str, object]:
        question, ident = "", ""
        files: list[Incoming] = []
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader):
                raise ValueError("a nested multipart")
            if part.name == "question":
                question = (await _bounded(part, QUESTION_BYTES))[0].decode("utf-8", "replace")
            elif part.name == "id":  # the page's id for the question (claimed once)
                ident = (await _bounded(part, 200))[0].decode("utf-8", "replace")
            elif part.name == "file":
                keep = len(files) < limits.max_per_question
                data, size = await _bounded(part, limits.max_bytes if keep else 0)
                files.append(_incoming(part, data, size))
            else:
                await part.release()
        return {"question": question, "id": ident, "files": tuple(files)}

    def _refused(self, kind: type[web.HTTPError], text: str) -> web.HTTPError:
        return kind(
            text=json.dumps({"error": text}),
            content_type="application/json",
            headers=self._headers,
        )


async def _bounded(part: BodyPartReader, keep: int) -> tuple[bytes, int]:
    """At most ``keep`` bytes of the part, and how many it had (the rest read and dropped)."""
    kept = bytearray()
    size = 0
    while chunk := await part.read_chunk(CHUNK):
        size += len(chunk)
        if len(kept) < keep:
            kept += chunk[: keep - len(kept)]
    return bytes(kept), size


def _incoming(part: BodyPartReader, data: bytes, size: int) -> Incoming:
    async def fetch() -> bytes:
        return data

    name = part.filename or "file"
    content_type = part.headers.get("Content-Type")
    return Incoming(name, size, content_type, f"upload:{name}", fetch)
