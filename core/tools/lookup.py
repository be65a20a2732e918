"""``lookup[keywords]``: BM25 over a local knowledge base, a folder of Markdown and text files.

Files are split into passages by headings and paragraphs; each passage keeps its file name and
heading path (``slack.md › Connect Slack › Socket Mode``) and is at most ``MAX_PASSAGE_CHARS``
long. Passages are ranked with BM25 (k1=1.5, b=0.75) over tokens from ``tokenize``, which
handles English (lower-cased words, stopwords dropped, plurals lightly stripped) and Chinese
(no spaces to split on, so every CJK run gives its single characters plus its character
bigrams), and any mix of the two.

The index is built off the event loop (``asyncio.to_thread``) by ``await tool.load()`` or on
first use, and rebuilt when the folder changes: at most every ``refresh_interval`` seconds a
use compares the files' names, sizes and mtimes with the last build. Binary, undecodable,
unreadable or oversized files are skipped with a warning naming the file.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import logging
import math
import os
import re
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.errors import ReactbotError, ToolError
from core.tools import ToolHints, ToolResult

__all__ = ["BM25Index", "Hit", "LookupTool", "Passage", "build_index", "split_passages", "tokenize"]

logger = logging.getLogger(__name__)

DOCUMENT_SUFFIXES = frozenset({".md", ".markdown", ".txt"})
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
MAX_FILE_BYTES = 1_000_000
MAX_PASSAGE_CHARS = 1000
SHOWN_PASSAGE_CHARS = 600
MAX_SECTION_CHARS = 4000
"""The best hit's whole section is returned up to this; further hits show their passage."""

# --- tokenizer ---------------------------------------------------------------------------------

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"


@functools.cache
def _token_re() -> re.Pattern[str]:
    # Compiled on first use, not at import: its classes of 28,000 code points take a few ms
    # to compile, which every start-up paid (bench/startup.py).
    return re.compile(rf"(?P<cjk>[{_CJK}]+)|(?P<word>[^\W_{_CJK}]+)")


_STOPWORD_TEXT = """
    a about after all also am an and any are as at be been before being but by can could
    did do does doing done for from get got had has have having he her here him his how i if
    in into is it its just me more most my no not now of off on once only or other our out
    over please s same she should so some such t than that the their them then there these
    they this those through to too under up us very was we were what when where which while
    who whom why will with would you your yours"""
_ENGLISH_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
# Single characters that carry no topic; their bigrams are kept (是否, 我们 still match).
_CHINESE_STOPCHARS = frozenset(
    "的了是在和与及或把被我你您他她它们吗呢吧啊么这那个也就都而之于以为着吧呀"
)


def tokenize(text: str, *, query: bool = False) -> list[str]:
    """Search tokens for English, Chinese and mixed text, in reading order.

    Indexed text gives each CJK character and each character bigram. A query gives only the
    bigrams of a CJK run (single characters only for a one-character run), as Lucene's CJK
    analysis does: otherwise a four-character phrase weighs seven terms against one English
    word, and common single characters drown the words that matter ("如何接入 Slack").
    """
    tokens: list[str] = []
    for match in _token_re().finditer(unicodedata.normalize("NFKC", text).casefold()):
        cjk, word = match.group("cjk"), match.group("word")
        if cjk:
            tokens += _cjk_tokens(cjk, unigrams=not query or len(cjk) == 1)
        elif word not in _ENGLISH_STOPWORDS:
            tokens.append(_strip_plural(word))
    return tokens


def _cjk_tokens(run: str, *, unigrams: bool) -> Iterator[str]:
    for i, char in enumerate(run):
        if unigrams and char not in _CHINESE_STOPCHARS:
            yield char
        if i + 1 < len(run):
            yield run[i : i + 2]


def _strip_plural(word: str) -> str:
    """Light plural stripping (queries -> query, tokens -> token, class stays class)."""
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


# --- passages ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Passage:
    file: str  # path relative to the knowledge-base folder, with "/"
    headings: tuple[str, ...]
    text: str

    @property
    def label(self) -> str:
        return " › ".join((self.file, *self.headings))

    def index_text(self) -> str:
        # The file stem and headings say what the passage is about, so they are indexed with
        # it; the nearest heading twice, a poor man's BM25F field weight.
        stem = Path(self.file).stem.replace("-", " ").replace("_", " ")
        return "\n".join((stem, *self.headings, *self.headings[-1:], self.text))


_HEADING_RE = re.compile(r"^(#{1,6})\s+(.+?)(?:\s+#+)?\s*$")
_FENCE_RE = re.compile(r"^\s*(```|~~~)")


def split_passages(file: str, text: str, *, markdown: bool = True) -> list[Passage]:
    """Passages of at most MAX_PASSAGE_CHARS: paragraphs grouped under their heading path."""
    passages: list[Passage] = []
    for headings, paragraphs in _sections(text, markdown=markdown):
        for chunk in _group(paragraphs, MAX_PASSAGE_CHARS):
            passages.append(Passage(file, headings, chunk))
    return passages


def _sections(text: str, *, markdown: bool) -> Iterator[tuple[tuple[str, ...], list[str]]]:
    """(heading path, paragraphs) per section; fenced code is never read as headings."""
    stack: list[tuple[int, str]] = []
    paragraphs: list[str] = []
    lines: list[str] = []
    in_fence = False
    for line in text.splitlines():
        if markdown and _FENCE_RE.match(line):
            in_fence = not in_fence
        heading = None if in_fence or not markdown else _HEADING_RE.match(line)
        if heading or (not line.strip() and not in_fence):
            _flush(lines, paragraphs)
        if heading:
            yield tuple(title for _, title in stack), paragraphs
            level, title = len(heading.group(1)), heading.group(2).strip()
            stack = [(lvl, t) for lvl, t in stack if lvl < level] + [(level, title)]
            paragraphs = []
        elif line.strip() or in_fence:
            lines.append(line.rstrip())
    _flush(lines, paragraphs)
    yield tuple(title for _, title in stack), paragraphs


def _flush(lines: list[str], paragraphs: list[str]) -> None:
    if lines:
        paragraphs.append("\n".join(lines).strip("\n"))
        lines.clear()


def _group(paragraphs: Iterable[str], limit: int) -> Iterator[str]:
    """Joins consecutive paragraphs up to ``limit`` characters; splits longer ones."""
    current = ""
    for paragraph in paragraphs:
        for piece in _pieces(paragraph, limit):
            if current and len(current) + 2 + len(piece) > limit:
                yield current
                current = ""
            current = f"{current}\n\n{piece}" if current else piece
    if current:
        yield current


def _pieces(paragraph: str, limit: int) -> Iterator[str]:
    """A paragraph cut into pieces of at most ``limit`` chars, at a line or space if possible."""
    while len(paragraph) > limit:
        cut = max(paragraph.rfind("\n", 0, limit), paragraph.rfind(" ", 0, limit))
        if cut < limit // 2:
            cut = limit
        yield paragraph[:cut].rstrip()
        paragraph = paragraph[cut:].lstrip()
    if paragraph:
        yield paragraph


# --- BM25 --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hit:
    passage: Passage
    score: float


class BM25Index:
    """Okapi BM25 over passages, with an inverted index so a query touches only its terms."""

    def __init__(self, passages: Sequence[Passage], *, k1: float = 1.5, b: float = 0.75) -> None:
        self.passages = tuple(passages)
        self._k1, self._b = k1, b
        self._postings: defaultdict[str, list[tuple[int, int]]] = defaultdict(list)
        self._lengths: list[int] = []
        for doc_id, passage in enumerate(self.passages):
            counts = Counter(tokenize(passage.index_text()))
            self._lengths.append(sum(counts.values()))
            for term, frequency in counts.items():
                self._postings[term].append((doc_id, frequency))
        self._average_length = sum(self._lengths) / len(self._lengths) if self._lengths else 1.0

    def __len__(self) -> int:
        return len(self.passages)

    def search(self, query: str, *, limit: int = 3) -> list[Hit]:
        scores: defaultdict[int, float] = defaultdict(float)
        for term in dict.fromkeys(tokenize(query, query=True)):
            postings = self._postings.get(term, [])
            idf = self._idf(len(postings))
            for doc_id, frequency in postings:
                scores[doc_id] += idf * self._saturation(frequency, self._lengths[doc_id])
        # Ties go to the earlier passage, so results are stable across rebuilds.
        best = heapq.nlargest(limit, scores.items(), key=lambda item: (item[1], -item[0]))
        return [Hit(self.passages[doc_id], score) for doc_id, score in best if score > 0]

    def _idf(self, document_frequency: int) -> float:
        # The "+1" form (Lucene's) keeps idf positive for terms found in most passages.
        n = len(self.passages)
        return math.log(1 + (n - document_frequency + 0.5) / (document_frequency + 0.5))

    def _saturation(self, frequency: int, length: int) -> float:
        norm = self._k1 * (1 - self._b + self._b * length / self._average_length)
        return frequency * (self._k1 + 1) / (frequency + norm)


# --- reading the folder (blocking: run in a thread) ---------------------------------------------

Snapshot = tuple[tuple[str, int, int], ...]


def _document_paths(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(
        path
        for path in root.rglob("*")
        if path.suffix.lower() in DOCUMENT_SUFFIXES
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
    if not root.is_dir():
        logger.warning(
            "knowledge base folder %s does not exist; lookup has nothing to search", root
        )
    passages: list[Passage] = []
    for path in _document_paths(root):
        text = _read_document(path)
        if text is not None:
            markdown = path.suffix.lower() in MARKDOWN_SUFFIXES
            passages += split_passages(path.relative_to(root).as_posix(), text, markdown=markdown)
    return BM25Index(passages)


class _Unusable(ReactbotError):
    """Why a file in the knowledge-base folder is not indexed."""


def _read_document(path: Path) -> str | None:
    """The file's text, or None (with a warning naming the file) when it is not usable text."""
    try:
        return _decode_document(path)
    except _Unusable as reason:
        logger.warning("knowledge base: skipping %s: %s", path, reason)
        return None


def _decode_document(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise _Unusable(f"larger than {MAX_FILE_BYTES} bytes")
        data = path.read_bytes()
    except OSError as exc:
        raise _Unusable(f"unreadable ({exc.strerror or type(exc).__name__})") from exc
    if b"\0" in data:
        raise _Unusable("binary (contains NUL bytes)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _Unusable("not valid UTF-8") from exc


# --- the tool ----------------------------------------------------------------------------------


class LookupTool:
    """Searches a folder of Markdown and text files; returns the best hit's whole section
    (the heading that matches the question, with all that is under it), then the next best
    passages, each with its place."""

    name = "lookup"
    example = "lookup[connect to Slack]"
    input_name = "query"
    hints = ToolHints(read_only=True, destructive=False, open_world=False)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        top_k: int = 3,
        refresh_interval: float = 10.0,
        description: str = (
            "searches the local knowledge base (about reactbot itself: setup, configuration, "
            "commands, traces, connecting Discord and Slack) and returns the best passages "
            "with their file and heading."
        ),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if top_k < 1:
            raise ValueError("top_k must be at least 1")
        self.description = description
        self._root = Path(path)
        self._top_k = top_k
        self._refresh_interval = refresh_interval
        self._clock = clock
        self._index: BM25Index | None = None
        self._snapshot: Snapshot = ()
        self._checked_at = -math.inf
        self._lock = asyncio.Lock()

    async def load(self) -> None:
        """Builds the index now (at start), rather than on the first question."""
        async with self._lock:
            await self._rebuild()

    async def search(self, query: str, *, limit: int | None = None) -> list[Hit]:
        index = await self._fresh_index()
        return index.search(query, limit=limit or self._top_k)

    async def run(self, query: str) -> ToolResult:
        query = " ".join(query.split()).strip("\"'")
        if not query:
            raise ToolError("lookup needs keywords, e.g. lookup[connect to Slack]")
        index = await self._fresh_index()
        if not len(index):
            raise ToolError("the knowledge base is empty: there is nothing to look up")
        hits = index.search(query, limit=self._top_k)
        if not hits:
            return ToolResult(f"no passage in the knowledge base matches '{query[:100]}'")
        file, path = section_of(hits[0].passage, query)
        blocks = [_render_section(index, file, path)]
        others = [h for h in hits[1:] if not _inside(h.passage, file, path)]
        blocks += [_render(number, hit) for number, hit in enumerate(others, start=2)]
        shown = [hits[0], *others]
        return ToolResult(
            "\n\n".join(blocks), sources=tuple(dict.fromkeys(hit.passage.file for hit in shown))
        )

    async def _fresh_index(self) -> BM25Index:
        async with self._lock:
            if self._index is None:
                await self._rebuild()
            elif self._clock() - self._checked_at >= self._refresh_interval:
                self._checked_at = self._clock()
                if await asyncio.to_thread(snapshot, self._root) != self._snapshot:
                    await self._rebuild()
            assert self._index is not None
            return self._index

    async def _rebuild(self) -> None:
        # Snapshot first: a file changing during the build makes the next check rebuild again.
        self._checked_at = self._clock()
        self._snapshot = await asyncio.to_thread(snapshot, self._root)
        self._index = await asyncio.to_thread(build_index, self._root)
        logger.info(
            "knowledge base %s: %d files, %d passages",
            self._root,
            len(self._snapshot),
            len(self._index),
        )


def section_of(passage: Passage, query: str) -> tuple[str, tuple[str, ...]]:
    """The section a hit stands for: of the headings above the passage, the one that says
    most of what was asked, at least two thirds of its terms ("How do I connect you to
    Slack?" -> "Connect reactbot to Slack", every step under it), the deepest on a tie; else
    the passage's own section."""
    terms = set(tokenize(query, query=True))
    headings = passage.headings
    best, best_cover = len(headings), 0
    for depth, heading in enumerate(headings, start=1):
        cover = len(terms & set(tokenize(heading)))
        if 3 * cover < 2 * len(terms):  # a heading above says most of the question, or none
            continue
        if cover > best_cover or (cover == best_cover and depth > best):
            best, best_cover = depth, cover
    return passage.file, headings[:best]


def _inside(passage: Passage, file: str, path: tuple[str, ...]) -> bool:
    return passage.file == file and bool(path) and passage.headings[: len(path)] == path


def _render_section(index: BM25Index, file: str, path: tuple[str, ...]) -> str:
    """``1. file › heading path`` and everything under that heading: its paragraphs and
    lists, and its subsections with their headings; at most ``MAX_SECTION_CHARS``."""
    parts: list[str] = []
    previous: tuple[str, ...] = ()
    for passage in index.passages:
        if passage.file != file or (path and passage.headings[: len(path)] != path):
            continue
        if not path and passage.headings:  # a file with no heading: only its own text
            continue
        below = passage.headings[len(path) :]
        for depth, title in enumerate(below):
            if below[: depth + 1] != previous[: depth + 1]:
                parts.append("#" * (len(path) + depth + 1) + " " + title)
        previous = below
        parts.append(passage.text)
    text = re.sub(r"\n{3,}", "\n\n", "\n\n".join(parts))
    if len(text) > MAX_SECTION_CHARS:
        text = text[: MAX_SECTION_CHARS - 1].rstrip() + "…"
    label = " › ".join((file, *path))
    return f"1. {label}\n{text}"


def _render(number: int, hit: Hit) -> str:
    text = re.sub(r"\n{3,}", "\n\n", hit.passage.text)
    if len(text) > SHOWN_PASSAGE_CHARS:
        text = text[: SHOWN_PASSAGE_CHARS - 1].rstrip() + "…"
    return f"{number}. {hit.passage.label}\n{text}"
