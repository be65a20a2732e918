"""What ``lookup[keywords]`` is built on: passages, a mixed-language tokenizer and BM25.

Text is split into passages by headings and paragraphs; each passage keeps its file name and
heading path (``slack.md › Connect Slack › Socket Mode``) and is at most ``MAX_PASSAGE_CHARS``
long. Passages are ranked with BM25 (k1=1.5, b=0.75) over tokens from ``tokenize``, which
handles English (lower-cased words, stopwords dropped, plurals lightly stripped) and Chinese
(no spaces to split on, so every CJK run gives its single characters plus its character
bigrams), and any mix of the two. ``search_together`` ranks several indexes (a
conversation's files, the operator's folders, the shipped manual) as one.

No I/O here: ``core.knowledge`` reads the folders and is the tool.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BM25Index",
    "Hit",
    "Passage",
    "render_hit",
    "render_section",
    "search_together",
    "section_of",
    "split_passages",
    "tokenize",
]

MAX_PASSAGE_CHARS = 1000
OVERLAP_CHARS = 200
"""A passage is indexed with the last words (up to this many characters) of the one before it
in the same section (or the same PDF page), so an answer cut by a passage boundary is still found whole
in the second passage; the stored and shown text is the passage's own."""
SHOWN_PASSAGE_CHARS = 600
MAX_SECTION_CHARS = 60_000
"""The best hit's whole section is returned up to this (a manual's section is a few thousand
characters); the agent bounds what the model reads of it, the trace keeps it all."""

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

    def index_text(self, lead: str = "") -> str:
        # The file stem and headings say what the passage is about, so they are indexed with
        # it; the nearest heading twice, a poor man's BM25F field weight. ``lead``: the end
        # of the passage before (``leads``), the overlap.
        stem = Path(self.file).stem.replace("-", " ").replace("_", " ")
        return "\n".join((stem, *self.headings, *self.headings[-1:], lead, self.text))


def leads(passages: Sequence[Passage]) -> list[str]:
    """Each passage's overlap with the one before it: that passage's last words, up to
    ``OVERLAP_CHARS``, when both are of the same file and section (a PDF: the same page);
    else "". Never across pages: a short next page would win with the words of the page
    before and cite the wrong page."""
    out = [""]
    for before, passage in itertools.pairwise(passages):
        same = before.file == passage.file and before.headings == passage.headings
        out.append(_tail(before.text) if same else "")
    return out[: len(passages)]


def _tail(text: str) -> str:
    if len(text) <= OVERLAP_CHARS:
        return text
    tail = text[-OVERLAP_CHARS:]
    space = tail.find(" ")
    return tail[space + 1 :] if 0 <= space < OVERLAP_CHARS // 2 else tail


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
    lead: str = ""
    """The end of the passage before it (the overlap it was indexed with), shown before it."""


class BM25Index:
    """Okapi BM25 over passages, with an inverted index so a query touches only its terms.

    Several indexes are searched as one with ``search_together``: the collection statistics
    (passage count, each term's document frequency, the average length) are then the union's,
    so a score from one index means what it means in another."""

    def __init__(self, passages: Sequence[Passage], *, k1: float = 1.5, b: float = 0.75) -> None:
        self.passages = tuple(passages)
        self.k1, self.b = k1, b
        self.postings: defaultdict[str, list[tuple[int, int]]] = defaultdict(list)
        self.lengths: list[int] = []
        self.leads = leads(self.passages)
        for doc_id in range(len(self.passages)):
            counts = Counter(tokenize(self.text_of(doc_id)))
            self.lengths.append(sum(counts.values()))
            for term, frequency in counts.items():
                self.postings[term].append((doc_id, frequency))
        self.total_length = sum(self.lengths)

    def __len__(self) -> int:
        return len(self.passages)

    def text_of(self, doc_id: int) -> str:
        """What passage ``doc_id`` is indexed (and embedded) as: its own text, its file and
        headings, and its overlap with the passage before."""
        return self.passages[doc_id].index_text(self.leads[doc_id])

    def hit(self, doc_id: int, score: float) -> Hit:
        return Hit(self.passages[doc_id], score, self.leads[doc_id])

    def search(self, query: str, *, limit: int = 3) -> list[Hit]:
        return [hit for _, hit in search_together([self], query, limit=limit)]


def search_together(
    indexes: Sequence[BM25Index], query: str, *, limit: int, first: int | None = None
) -> list[tuple[int, Hit]]:
    """The best ``limit`` passages of all ``indexes`` ranked as one BM25 index over their
    union, each with the position of its index; ``first``: that index's hits come before all
    others (the conversation's own files), each group in score order. Ties go to the earlier
    index, then the earlier passage, so results are stable across rebuilds."""
    count = sum(len(index) for index in indexes)
    if not count or limit < 1:
        return []
    k1, b = indexes[0].k1, indexes[0].b
    average = sum(index.total_length for index in indexes) / count or 1.0
    scores: defaultdict[tuple[int, int], float] = defaultdict(float)
    for term in dict.fromkeys(tokenize(query, query=True)):
        postings = [index.postings.get(term, []) for index in indexes]
        frequency = sum(map(len, postings))
        # The "+1" form (Lucene's) keeps idf positive for terms found in most passages.
        idf = math.log(1 + (count - frequency + 0.5) / (frequency + 0.5))
        for where, (index, found) in enumerate(zip(indexes, postings, strict=True)):
            for doc_id, tf in found:
                norm = k1 * (1 - b + b * index.lengths[doc_id] / average)
                scores[where, doc_id] += idf * tf * (k1 + 1) / (tf + norm)
    best = heapq.nlargest(
        limit,
        ((key, score) for key, score in scores.items() if score > 0),
        key=lambda item: (item[0][0] == first, item[1], -item[0][0], -item[0][1]),
    )
    return [(where, indexes[where].hit(doc_id, score)) for (where, doc_id), score in best]


# --- rendering ---------------------------------------------------------------------------------


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


def inside(passage: Passage, file: str, path: tuple[str, ...]) -> bool:
    return passage.file == file and bool(path) and passage.headings[: len(path)] == path


def render_section(index: BM25Index, file: str, path: tuple[str, ...]) -> str:
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
    label = " › ".join((file, *path))
    return f"1. {label}\n{_bounded_section(text, label)}"


def _bounded_section(text: str, label: str) -> str:
    """``text``, or its first ``MAX_SECTION_CHARS`` cut after a paragraph (else a word) with
    a line that says how much is left and where."""
    if len(text) <= MAX_SECTION_CHARS:
        return text
    cut = text.rfind("\n\n", 0, MAX_SECTION_CHARS)
    if cut < MAX_SECTION_CHARS // 2:
        cut = max(text.rfind(" ", 0, MAX_SECTION_CHARS), MAX_SECTION_CHARS // 2)
    rest = len(text) - cut
    return f"{text[:cut].rstrip()}\n\n[… {rest:,} more characters of this section in {label}]"


def render_hit(number: int, hit: Hit, label: str | None = None) -> str:
    text = re.sub(r"\n{3,}", "\n\n", hit.passage.text)
    if hit.lead:  # the words just before it: an answer cut at the boundary reads whole
        text = f"…{' '.join(hit.lead.split())} {text}"
    if len(text) > SHOWN_PASSAGE_CHARS:
        text = text[: SHOWN_PASSAGE_CHARS - 1].rstrip() + "…"
    return f"{number}. {label or hit.passage.label}\n{text}"
