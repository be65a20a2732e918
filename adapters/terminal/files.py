"""Local files for the terminal: ``reactbot ask --file PATH`` and ``/attach PATH`` in
``chat``. A path becomes an ``Incoming`` (its "download" reads the file, within
``files.max_bytes``), and goes through the intake every platform uses
(``adapters.attachments.ConversationFiles``: the same limits, the same worker processes,
the same refusal lines); the run's ``lookup`` then searches it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from adapters.attachments import carried
from adapters.channels import RunChoice
from adapters.words import FILES_OFF
from core.file_workers import FileReaders
from core.files import (
    FileLimits,
    FileRefused,
    FileStore,
    Incoming,
    Intake,
    safe_name,
    size_text,
)
from core.tools import ToolRegistry

__all__ = ["FILES_OFF", "LocalFiles", "indexed_line", "local_file"]


class _FilesApp(Protocol):
    """What reading local files needs of the application."""

    @property
    def file_readers(self) -> FileReaders: ...

    def file_limits(self) -> FileLimits: ...


def local_file(path: Path, *, max_bytes: int) -> Incoming:
    """``path`` (``~`` is the home folder) as an attachment; reading it, in a thread, raises
    ``FileRefused`` (one line) when it is missing, unreadable or larger than ``max_bytes``."""
    name = safe_name(path.name)

    async def fetch() -> bytes:
        return await asyncio.to_thread(_read, path, name, max_bytes)

    return Incoming(path.name, None, None, f"file:{path}", fetch)


def _read(path: Path, name: str, max_bytes: int) -> bytes:
    try:
        with path.expanduser().open("rb") as file:
            data = file.read(max_bytes + 1)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise FileRefused(f"{name}: cannot be read ({reason}).") from exc
    if len(data) > max_bytes:
        raise FileRefused(f"{name}: larger than {size_text(max_bytes)}.")
    return data


class LocalFiles:
    """The conversation's files for the terminal, through the platforms' intake."""

    def __init__(self, app: _FilesApp, store: FileStore, *, enabled: bool = True) -> None:
        limits = app.file_limits()
        self.enabled = enabled
        self._limits = limits
        # Nothing is downloaded: a local file is read by its own ``fetch``.
        self._files = carried(store, limits, app.file_readers, platform="the terminal")

    async def take(self, conversation: str, paths: Sequence[Path]) -> Intake:
        """Reads ``paths`` into the conversation now; the intake says what was refused."""
        if not self.enabled:
            return Intake(refused=[FILES_OFF])
        incoming = [local_file(path, max_bytes=self._limits.max_bytes) for path in paths]
        return await self._files.take(conversation, incoming)

    async def tools(self, conversation: str, default: ToolRegistry) -> ToolRegistry | None:
        """The run's tools: ``default`` with a ``lookup`` that also searches the
        conversation's files (None: it has none, the agent's own tools)."""
        if not self.enabled:
            return None
        _, tools = await self._files.prepare(conversation, (), RunChoice(), default)
        return tools


def indexed_line(intake: Intake) -> str:
    """``📎 Read notes.txt, report.pdf: ask about them.`` ("" when nothing was read)."""
    if not intake.indexed:
        return ""
    return f"📎 Read {', '.join(intake.indexed)}: lookup searches it from now on."
