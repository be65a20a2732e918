"""Files people attach to a question, as knowledge for that conversation.

A file becomes passages in three steps, none of which does I/O::

    kind_of(name)            text | markdown | csv | html | pdf | code, or None
    extract(name, data)      [(page or None, text)], or FileRefused (one clear line)
    passages_of(name, pages) lookup Passages: file name, ("page 3",) for a PDF page, text

The passages of a conversation live in a ``FileStore`` (in memory, bounded, here; on Redis
in ``core.stores``) for as long as the conversation's history, and ``/reset`` drops them.
``core.knowledge.LookupTool`` searches them with the knowledge folders, each result saying
which file and page (``report.pdf, page 3``).

Errors::

    FileRefused      a file (or a question's worth of files) is refused; ``str()`` is the line
                     the person sees
"""

from __future__ import annotations

import base64
import io
import logging
import re
import unicodedata
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Protocol

from core.errors import ReactbotError
from core.stores.memory import InMemoryFileStore
from core.stores.protocols import FileStore
from core.tools.lookup import Passage, split_passages

__all__ = [
    "KINDS",
    "FileLimits",
    "FileReader",
    "FileRefused",
    "FileStore",
    "InMemoryFileStore",
    "Incoming",
    "Intake",
    "Page",
    "extract",
    "ingest",
    "kind_of",
    "passages_of",
]

log = logging.getLogger(__name__)

MB = 1024 * 1024
MAX_PDF_PAGES = 2000

_SUFFIXES: dict[str, str] = {
    ".txt": "text",
    ".text": "text",
    ".log": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".csv": "csv",
    ".tsv": "csv",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
_CODE_SUFFIXES = frozenset(
    [
        ".py",
        ".pyi",
        ".js",
        ".mjs",
        ".cjs",
        ".ts",
        ".tsx",
        ".jsx",
        ".java",
        ".kt",
        ".kts",
        ".scala",
        ".go",
        ".rs",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".hpp",
        ".cs",
        ".rb",
        ".php",
        ".swift",
        ".m",
        ".sh",
        ".bash",
        ".zsh",
        ".ps1",
        ".sql",
        ".r",
        ".lua",
        ".pl",
        ".hs",
        ".ex",
        ".exs",
        ".erl",
        ".clj",
        ".dart",
        ".json",
        ".yaml",
        ".yml",
        ".toml",
        ".ini",
        ".cfg",
        ".xml",
        ".css",
        ".scss",
        ".vue",
        ".svelte",
        ".proto",
        ".graphql",
        ".dockerfile",
        ".makefile",
        ".gradle",
        ".tf",
    ]
)
_IMAGE_SUFFIXES = frozenset([".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp"])
_AUDIO_SUFFIXES = frozenset(
    [".ogg", ".oga", ".opus", ".mp3", ".m4a", ".wav", ".webm", ".flac", ".mpga", ".aac"]
)
KINDS = frozenset({"text", "markdown", "csv", "html", "pdf", "code"})


class FileRefused(ReactbotError):
    """A file is not indexed; the message is one line the person sees, naming the file."""


@dataclass(frozen=True, slots=True)
class FileLimits:
    """``files.*`` in the config."""

    max_bytes: int = 10 * MB
    max_per_question: int = 5
    max_chars_per_conversation: int = 500_000
    allowed_types: frozenset[str] = KINDS


def kind_of(name: str) -> str | None:
    """The kind of file by its name's extension; None when it is no kind we read."""
    path = PurePosixPath(name.lower())
    suffix = path.suffix or f".{path.name}"  # Makefile, Dockerfile
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    return "code" if suffix in _CODE_SUFFIXES else None


def is_image(name: str, content_type: str | None = None) -> bool:
    return (content_type or "").startswith("image/") or (
        PurePosixPath(name.lower()).suffix in _IMAGE_SUFFIXES
    )


def is_audio(item: Incoming) -> bool:
    """A voice note or an audio file (heard by ``adapters.voice``, never read as a
    document): an audio type or extension, or a length the platform gave (a round video)."""
    return (
        item.seconds is not None
        or (item.content_type or "").startswith("audio/")
        or PurePosixPath(item.name.lower()).suffix in _AUDIO_SUFFIXES
    )


def safe_name(name: str) -> str:
    """A file name fit to show and to cite: no path, no control or format characters,
    no Markdown/mention syntax, at most 100 characters."""
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in name if unicodedata.category(c)[0] not in "CZ" or c == " ").strip()
    name = re.sub(r"[`*_~|<>@\[\]()#]", "-", name)
    return name[:100] or "file"


# --- extraction ---------------------------------------------------------------------------

Page = tuple[int | None, str]
"""(page number for a PDF, else None; the page's text)."""


def extract(name: str, data: bytes, *, max_chars: int = 500_000) -> list[Page]:
    """The text of a file, per page for a PDF; at most ``max_chars`` characters in all.

    Raises ``FileRefused`` for a kind we do not read, undecodable text, or a malformed or
    encrypted PDF; nothing else.
    """
    kind = kind_of(name)
    shown = safe_name(name)
    if kind is None:
        raise FileRefused(f"{shown}: I can't read this kind of file.")
    if kind == "pdf":
        pages = _pdf_pages(shown, data, max_chars=max_chars)
    else:
        text = _decode(shown, data)
        if kind == "html":
            text = html_text(text)
        elif kind == "csv":
            text = csv_text(text, delimiter="\t" if name.lower().endswith(".tsv") else ",")
        pages = [(None, text)]
    return _bounded(pages, max_chars)


def _bounded(pages: Iterable[Page], max_chars: int) -> list[Page]:
    out: list[Page] = []
    left = max_chars
    for number, text in pages:
        text = _clean(text)
        if not text.strip():
            continue
        if left <= 0:
            break
        out.append((number, text[:left]))
        left -= len(text[:left])
    return out


def _clean(text: str) -> str:
    # NUL and other C0 controls (but tabs and newlines) carry nothing and upset some stores.
    return re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", "", text.replace("\r\n", "\n"))


def _decode(shown: str, data: bytes) -> str:
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            pass
    if b"\0" in data[:8192]:
        raise FileRefused(f"{shown}: this looks like a binary file, not text.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    raise FileRefused(f"{shown}: not UTF-8 text; save it as UTF-8 and attach it again.")


def html_text(html: str) -> str:
    """The readable text of an HTML page, headings as Markdown headings."""
    from core.html_text import html_text as text_of  # html.parser loads with the first page

    return text_of(html)


def csv_text(text: str, *, delimiter: str = ",") -> str:
    """One line per row, cells joined by `` | ``, each row prefixed by the header's names
    when the first row looks like one, so a passage found alone still says what is what."""
    import csv  # with the first CSV file, not with every start-up

    csv.field_size_limit(1_000_000)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    lines: list[str] = []
    header: list[str] | None = None
    try:
        for row in reader:
            cells = [" ".join(cell.split()) for cell in row]
            if header is None:
                header = cells
                lines.append(" | ".join(cells))
            elif len(cells) == len(header):
                lines.append("; ".join(f"{h}: {c}" for h, c in zip(header, cells, strict=True)))
            else:
                lines.append(" | ".join(cells))
    except csv.Error:
        return text  # not really CSV: its text is still worth indexing
    # Blank lines between rows, so passages split between rows, never inside one.
    return "\n\n".join(lines)


def _pdf_pages(shown: str, data: bytes, *, max_chars: int) -> list[Page]:
    from pypdf import PdfReader  # imported on use: most conversations never see a PDF
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            raise FileRefused(f"{shown}: the PDF is encrypted; attach an unprotected copy.")
        pages: list[Page] = []
        total = 0
        for number, page in enumerate(reader.pages, start=1):
            if number > MAX_PDF_PAGES or total >= max_chars:
                break
            text = page.extract_text() or ""
            total += len(text)
            pages.append((number, text))
    except FileRefused:
        raise
    except (PyPdfError, ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        raise FileRefused(f"{shown}: the PDF could not be read ({type(exc).__name__}).") from exc
    except RecursionError as exc:
        raise FileRefused(f"{shown}: the PDF could not be read (too deeply nested).") from exc
    if not any(text.strip() for _, text in pages):
        raise FileRefused(f"{shown}: the PDF has no text to read (scanned pages?).")
    return pages


# --- passages -----------------------------------------------------------------------------


def passages_of(name: str, pages: Sequence[Page], *, shown: str | None = None) -> list[Passage]:
    """Lookup passages of a file's pages; a PDF page's passages carry ``("page N",)``.
    ``shown``: the name they cite (a knowledge folder's relative path), else ``name``'s own."""
    shown = shown or safe_name(name)
    markdown = kind_of(name) in ("markdown", "html")
    out: list[Passage] = []
    for number, text in pages:
        for passage in split_passages(shown, text, markdown=markdown):
            headings = passage.headings if number is None else (f"page {number}",)
            out.append(Passage(shown, headings, passage.text))
    return out


def cite(passage: Passage) -> str:
    """``report.pdf, page 3`` or ``notes.md › Setup``."""
    if passage.headings and passage.headings[0].startswith("page "):
        return f"{passage.file}, {passage.headings[0]}"
    return passage.label


# --- the store ----------------------------------------------------------------------------


def indexed_chars(passages: Iterable[Passage]) -> int:
    return sum(len(p.text) for p in passages)


# --- taking in a question's files ---------------------------------------------------------


@dataclass(slots=True)
class Intake:
    """What came of a question's attachments: lines for the reply, images set aside."""

    refused: list[str] = field(default_factory=list)
    indexed: list[str] = field(default_factory=list)
    images: list[Incoming] = field(default_factory=list)
    """Image attachments: shown to a model that reads images (``see``), else ignored."""
    images_shown: bool = False
    shown: list[str] = field(default_factory=list)
    """The images as ``data:`` URLs for a model that reads them (``see``)."""
    passages: list[Passage] | None = None
    """All the conversation's passages once these files were added (None: not read here)."""

    def notice(self, *, limit: int = 1800) -> str:
        """One line per refused file (and one for images a text-only model cannot read), at
        most ``limit`` characters (a Discord message holds 2,000): lines that do not fit are
        counted instead."""
        lines = [" ".join(line.split()) for line in self.refused]  # one line each
        if self.images and not self.images_shown:
            lines.append("🖼️ Images are ignored: this channel's model reads text only.")
        kept: list[str] = []
        used = 0
        for number, line in enumerate(lines):
            rest = len(lines) - number
            more = f"… and {rest} more refused." if rest > 1 else ""
            if used + len(line) + 1 + len(more) > limit and (rest > 1 or used + len(line) > limit):
                kept.append(f"… and {rest} more refused.")
                break
            kept.append(line[:limit])
            used += len(line) + 1
        return "\n".join(kept)


def take(name: str, data: bytes, *, limits: FileLimits, room: int) -> list[Passage]:
    """Passages of one downloaded file within ``room`` characters; ``FileRefused`` else.
    Reads in the calling thread: for trusted files (tests, benchmarks); a person's files go
    through a ``FileReader`` (``ingest``)."""
    check(name, data, limits=limits, room=room)
    return fitted(name, extract(name, data, max_chars=room + 1), room=room)


def check(name: str, data: bytes, *, limits: FileLimits, room: int) -> None:
    """Refuses a file by its kind, its size or the conversation's room, before reading it."""
    shown = safe_name(name)
    kind = kind_of(name)
    if kind is None or kind not in limits.allowed_types:
        raise FileRefused(f"{shown}: this kind of file is not accepted here.")
    if len(data) > limits.max_bytes:
        raise FileRefused(f"{shown}: larger than {size_text(limits.max_bytes)}.")
    if room <= 0:
        raise FileRefused(
            f"{shown}: this conversation already holds "
            f"{limits.max_chars_per_conversation:,} characters of files; /reset to start over."
        )


def fitted(name: str, pages: Sequence[Page], *, room: int) -> list[Passage]:
    """The passages of a file's pages, or ``FileRefused`` when they exceed ``room``."""
    chars = sum(len(text) for _, text in pages)
    if chars > room:
        raise FileRefused(
            f"{safe_name(name)}: too long; this conversation has room for {room:,} more "
            "characters of files."
        )
    return passages_of(name, pages)


@dataclass(frozen=True, slots=True)
class Incoming:
    """An attachment as the platform describes it; ``fetch`` downloads it (within the size
    limit, raising ``FileRefused`` otherwise)."""

    name: str
    size: int | None
    content_type: str | None
    url: str
    fetch: Callable[[], Awaitable[bytes]]
    seconds: float | None = None
    """A voice note's or a video note's length, as the platform gave it."""


async def ingest(
    conversation: str,
    incoming: Sequence[Incoming],
    *,
    store: FileStore,
    limits: FileLimits,
    reader: FileReader,
    owner: str | None = None,
    on_queue: Callable[[bool], None] | None = None,
) -> Intake:
    """Downloads, reads (with ``reader``: ``core.file_workers.FileReaders`` in a worker
    process, one file of ``owner``'s at a time, ``on_queue`` told when one waits its turn)
    and indexes a question's files into the conversation's store, before the run starts.
    Each refused file gives one line; the others are kept."""
    intake = Intake()
    documents: list[Incoming] = []
    for item in incoming:
        if is_audio(item):
            continue  # heard before the run (adapters.voice), never indexed
        if is_image(item.name, item.content_type):
            intake.images.append(item)
        else:
            documents.append(item)
    if not documents:
        return intake
    for item in documents[limits.max_per_question :]:
        intake.refused.append(
            f"⚠️ {safe_name(item.name)}: not read, at most {limits.max_per_question} files "
            "per question."
        )
    stored = await store.load(conversation)
    room = limits.max_chars_per_conversation - indexed_chars(stored)
    for item in documents[: limits.max_per_question]:
        try:
            passages = await _take_one(
                item, limits=limits, room=room, reader=reader, owner=owner, on_queue=on_queue
            )
        except FileRefused as refusal:
            intake.refused.append(f"⚠️ {refusal}")
            continue
        await store.add(conversation, passages)
        stored += passages
        room -= indexed_chars(passages)
        intake.indexed.append(safe_name(item.name))
    intake.passages = stored
    return intake


async def _take_one(
    item: Incoming,
    *,
    limits: FileLimits,
    room: int,
    reader: FileReader,
    owner: str | None,
    on_queue: Callable[[bool], None] | None,
) -> list[Passage]:
    shown = safe_name(item.name)
    kind = kind_of(item.name)
    if kind is None or kind not in limits.allowed_types:
        raise FileRefused(f"{shown}: this kind of file is not accepted here.")
    if item.size is not None and item.size > limits.max_bytes:
        raise FileRefused(f"{shown}: larger than {size_text(limits.max_bytes)}.")
    data = await item.fetch()
    check(item.name, data, limits=limits, room=room)
    pages = await reader.read(item.name, data, max_chars=room + 1, owner=owner, on_queue=on_queue)
    return fitted(item.name, pages, room=room)


class FileReader(Protocol):
    """Turns a downloaded file into its pages (``extract``), or raises ``FileRefused`` with
    one line; ``core.file_workers.FileReaders`` does it in worker processes, within limits,
    one file of each ``owner`` at a time (``on_queue``: told when one waits its turn)."""

    async def read(
        self,
        name: str,
        data: bytes,
        *,
        max_chars: int,
        owner: str | None = None,
        on_queue: Callable[[bool], None] | None = None,
    ) -> list[Page]: ...


def size_text(n: int) -> str:
    return f"{n / MB:g} MB" if n >= MB else f"{n:,} bytes"


IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
"""What OpenAI-compatible vision endpoints take (PNG, JPEG, WEBP, non-animated GIF)."""


async def see(intake: Intake, *, max_images: int) -> list[str]:
    """The intake's images as ``data:`` URLs for a model that reads images (downloaded within
    the size limit), also kept in ``intake.shown``; a refused one gets its line, as a
    document would."""
    urls: list[str] = []
    for item in intake.images[:max_images]:
        kind = _image_type(item)
        if kind is None:
            intake.refused.append(f"⚠️ {safe_name(item.name)}: not an image type models read.")
            continue
        try:
            data = await item.fetch()
        except FileRefused as refusal:
            intake.refused.append(f"⚠️ {refusal}")
            continue
        urls.append(f"data:{kind};base64,{base64.b64encode(data).decode('ascii')}")
    for item in intake.images[max_images:]:
        intake.refused.append(
            f"⚠️ {safe_name(item.name)}: not shown, at most {max_images} images per question."
        )
    intake.images_shown = True
    intake.shown = urls
    return urls


def _image_type(item: Incoming) -> str | None:
    declared = (item.content_type or "").split(";")[0].strip().lower()
    if declared in IMAGE_TYPES.values():
        return declared
    return IMAGE_TYPES.get(PurePosixPath(item.name.lower()).suffix)
