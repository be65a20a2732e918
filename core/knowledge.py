"""``lookup[keywords]``: the knowledge a run may search, ranked on one scale.

Three kinds of source, searched together as one BM25 index (``search_together``: one passage
count, one document frequency per term, one average length), never by comparing scores that
different indexes gave:

    the conversation's files   attached by people (``core.files``); their hits come first
    the operator's folders     ``tools.lookup.paths``: Markdown, text, PDF, HTML, CSV, code
    the shipped manual         reactbot's own docs (``bot/knowledge``): searched only when no
                               folder is set (the demo) or the keywords name reactbot

With ``embeddings`` (a ``core.embeddings.Hybrid``: ``tools.lookup.embeddings``), every source
is also ranked by cosine to the query's vector and the two rankings are fused by rank; a
failing endpoint leaves that query to BM25 alone. A passage is indexed (and embedded) with
the last words of the one before it, so an answer cut by a boundary is still found.

A folder's index is built off the event loop (``asyncio.to_thread``) by ``await tool.load()``
or on first use, and rebuilt when the folder changes: at most every ``refresh_interval``
seconds a use compares the files' names, sizes and mtimes with the last build. Binary,
undecodable, unreadable or oversized files are skipped with a warning naming the file.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import ReactbotError, ToolError
from core.files import FileRefused, cite, extract, kind_of, passages_of
from core.tools import ToolDisplay, ToolHints, ToolRegistry, ToolResult
from core.tools.lookup import (
    BM25Index,
    Hit,
    Passage,
    inside,
    render_hit,
    render_section,
    search_together,
    section_of,
    tokenize,
)

if TYPE_CHECKING:
    from core.embeddings import Hybrid

__all__ = [
    "Folder",
    "LookupTool",
    "SourceCount",
    "build_index",
    "names_reactbot",
    "registry_with_files",
]

logger = logging.getLogger(__name__)

MAX_FILE_BYTES = 10_000_000
MAX_FILE_CHARS = 500_000
"""Characters of one file indexed; the rest of a longer file is not searched."""
MANUAL_WORD = "reactbot"


def names_reactbot(query: str) -> bool:
    """Whether the keywords are about reactbot itself: they hold the word ``reactbot`` (any
    case, any script around it). The one rule that decides whether a deployment with its own
    folders also searches the shipped manual."""
    return MANUAL_WORD in tokenize(query, query=True)


# --- reading a folder (blocking: run in a thread) -------------------------------------------

Snapshot = tuple[tuple[str, int, int], ...]


def _document_paths(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(
        path
        for path in root.rglob("*")
        if kind_of(path.name) is not None
        and not any(part.startswith(".") for part in path.relative_to(root).parts)
        and path.is_file()
    )


def snapshot(root: Path) -> Snapshot:
    """Names, sizes and mtimes of the documents: when it changes, the index is stale."""
    entries: list[tuple[str, int, int]] = []
    for path in _document_paths(root):
        try:
            stat = path.stat()
        except OSError:
            continue  # vanished between listing and stat; the next look will tell
        entries.append((path.relative_to(root).as_posix(), stat.st_size, stat.st_mtime_ns))
    return tuple(entries)


def build_index(root: Path) -> BM25Index:
    """The passages of every document under ``root``, each citing its relative path."""
    if not root.is_dir():
        logger.warning("knowledge folder %s does not exist; lookup has nothing there", root)
    passages: list[Passage] = []
    for path in _document_paths(root):
        relative = path.relative_to(root).as_posix()
        try:
            pages = extract(path.name, _read(path), max_chars=MAX_FILE_CHARS)
        except (_Unusable, FileRefused) as reason:
            logger.warning("knowledge folder: skipping %s: %s", path, reason)
            continue
        passages += passages_of(path.name, pages, shown=relative)
    return BM25Index(passages)


class _Unusable(ReactbotError):
    """Why a file in a knowledge folder is not indexed."""


def _read(path: Path) -> bytes:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise _Unusable(f"larger than {MAX_FILE_BYTES:,} bytes")
        return path.read_bytes()
    except OSError as exc:
        raise _Unusable(f"unreadable ({exc.strerror or type(exc).__name__})") from exc


class Folder:
    """One folder's index, built on first use and rebuilt when the folder changes."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        refresh_interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = Path(path)
        self._refresh_interval = refresh_interval
        self._clock = clock
        self._index: BM25Index | None = None
        self._snapshot: Snapshot = ()
        self._checked_at = -math.inf
        self._lock = asyncio.Lock()

    async def load(self) -> BM25Index:
        async with self._lock:
            await self._rebuild()
            assert self._index is not None
            return self._index

    async def index(self) -> BM25Index:
        async with self._lock:
            if self._index is None:
                await self._rebuild()
            elif self._clock() - self._checked_at >= self._refresh_interval:
                self._checked_at = self._clock()
                if await asyncio.to_thread(snapshot, self.root) != self._snapshot:
                    await self._rebuild()
            assert self._index is not None
            return self._index

    async def _rebuild(self) -> None:
        # Snapshot first: a file changing during the build makes the next check rebuild again.
        self._checked_at = self._clock()
        self._snapshot = await asyncio.to_thread(snapshot, self.root)
        self._index = await asyncio.to_thread(build_index, self.root)
        logger.info(
            "knowledge folder %s: %d files, %d passages",
            self.root,
            len(self._snapshot),
            len(self._index),
        )


# --- the tool ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SourceCount:
    """One source ``reactbot tools`` lists: what it is, its passages, when it is searched."""

    name: str
    kind: str  # "folder" | "manual"
    passages: int
    when: str


@dataclass(frozen=True, slots=True)
class _Source:
    kind: str  # "files" | "folder" | "manual"
    index: BM25Index


class LookupTool:
    """Searches the conversation's files, the operator's folders and (when asked about
    reactbot, or when there is no folder) the shipped manual; returns the best hit's whole
    section when it comes from a folder (the heading that matches the question, with all that
    is under it), then the next best passages, each with its place."""

    name = "lookup"
    display = ToolDisplay("📖", "Looking it up")
    example = "lookup[connect to Slack]"
    input_name = "query"
    hints = ToolHints(read_only=True, destructive=False, open_world=False)

    def __init__(
        self,
        paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] = (),
        *,
        manual: str | os.PathLike[str] | None = None,
        top_k: int = 3,
        refresh_interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        embeddings: Hybrid | None = None,
    ) -> None:
        if top_k < 1:
            raise ValueError("top_k must be at least 1")
        roots = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
        self.folders = tuple(
            Folder(p, refresh_interval=refresh_interval, clock=clock) for p in roots
        )
        self.manual = (
            None
            if manual is None
            else Folder(manual, refresh_interval=refresh_interval, clock=clock)
        )
        self.top_k = top_k
        self.embeddings = embeddings
        self.files = BM25Index(())
        self.description = self._describe()

    def with_files(self, files: Sequence[Passage]) -> LookupTool:
        """This tool for one run: the same folders (their indexes shared), and ``files``."""
        tool = copy.copy(self)
        tool.files = BM25Index(files)
        tool.description = tool._describe()
        return tool

    def _describe(self) -> str:
        # File names are user text: they stay out of the description (the system prompt) and
        # reach the model only inside observations.
        parts = []
        if self.files.passages:
            parts.append(
                f"the {len({p.file for p in self.files.passages})} file(s) attached in "
                "this conversation"
            )
        if self.folders:
            parts.append("the local knowledge base")
        if self.manual is not None:
            parts.append(
                "reactbot's own manual (setup, configuration, commands, traces, connecting "
                "Discord, Slack and Telegram)"
                + ("; put the word reactbot in the keywords to search it" if self.folders else "")
            )
        searched = (
            ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]
            if parts
            else "nothing"
        )
        return f"searches {searched}; returns the best passages with their file and heading."

    async def load(self) -> None:
        """Builds the folders' indexes now (at start), rather than on the first question."""
        indexes = [await folder.load() for folder in self._all_folders()]
        if self.embeddings is not None:
            await self.embeddings.warm(indexes)

    async def sources(self) -> list[SourceCount]:
        """Every folder and the manual with its passage count, for ``reactbot tools``."""
        counts = [
            SourceCount(str(folder.root), "folder", len(await folder.index()), "always")
            for folder in self.folders
        ]
        if self.manual is not None:
            when = "when the keywords name reactbot" if self.folders else "always (no folder set)"
            counts.append(
                SourceCount(str(self.manual.root), "manual", len(await self.manual.index()), when)
            )
        return counts

    async def search(self, query: str, *, limit: int | None = None) -> list[Hit]:
        ranked = await self._ranked(await self._sources(query), query, limit or self.top_k)
        return [hit for _, hit in ranked]

    async def run(self, query: str) -> ToolResult:
        query = " ".join(query.split()).strip("\"'")
        if not query:
            raise ToolError(f"lookup needs keywords, e.g. {self.example}")
        sources = await self._sources(query)
        if not any(len(source.index) for source in sources):
            raise ToolError("the knowledge base is empty: there is nothing to look up")
        ranked = await self._ranked(sources, query, self.top_k)
        if not ranked:
            return ToolResult(f"no passage in {self._where()} matches '{query[:100]}'")
        (first, best), blocks = ranked[0], []
        if first.kind == "files":
            others = shown = ranked
        else:  # a folder's best hit: its whole section, then the hits outside it
            file, path = section_of(best.passage, query)
            blocks.append(render_section(first.index, file, path))
            others = [
                (s, h) for s, h in ranked[1:] if s is not first or not inside(h.passage, file, path)
            ]
            shown = [ranked[0], *others]
        blocks += [
            render_hit(number, hit, _cited(source, hit))
            for number, (source, hit) in enumerate(others, start=len(blocks) + 1)
        ]
        return ToolResult(
            "\n\n".join(blocks),
            sources=tuple(dict.fromkeys(_source_name(s, h) for s, h in shown)),
        )

    async def _sources(self, query: str) -> list[_Source]:
        sources = [_Source("files", self.files)] if self.files.passages else []
        sources += [_Source("folder", await folder.index()) for folder in self.folders]
        if self.manual is not None and (not self.folders or names_reactbot(query)):
            sources.append(_Source("manual", await self.manual.index()))
        return sources

    async def _ranked(
        self, sources: list[_Source], query: str, limit: int
    ) -> list[tuple[_Source, Hit]]:
        if not sources:
            return []
        first = 0 if sources[0].kind == "files" else None
        indexes = [s.index for s in sources]
        if self.embeddings is None:
            ranked = search_together(indexes, query, limit=limit, first=first)
        else:
            ranked = await self.embeddings.search(indexes, query, limit=limit, first=first)
        return [(sources[where], hit) for where, hit in ranked]

    def _where(self) -> str:
        if self.files.passages and not self.folders and self.manual is None:
            return "the attached files"
        return "the knowledge base"

    def _all_folders(self) -> list[Folder]:
        return [*self.folders, *([self.manual] if self.manual is not None else [])]


def _cited(source: _Source, hit: Hit) -> str:
    return cite(hit.passage) if source.kind == "files" else hit.passage.label


def _source_name(source: _Source, hit: Hit) -> str:
    return cite(hit.passage) if source.kind == "files" else hit.passage.file


def registry_with_files(base: ToolRegistry, files: Sequence[Passage]) -> ToolRegistry:
    """A registry for one run: ``base``'s tools, with ``lookup`` also searching ``files``
    (a lookup of files alone when ``base`` has none)."""
    registry = ToolRegistry()
    lookup: LookupTool | None = None
    for tool in base:
        if tool.name.lower() == "lookup":
            lookup = tool if isinstance(tool, LookupTool) else None
            continue
        registry.add(tool)
    registry.add((lookup or LookupTool()).with_files(files))
    return registry
