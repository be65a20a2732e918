"""Line heads: is the start of this line a label (``Thought:``, ``**Action 2**：``, …)?"""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass
from typing import Literal

from core.parser.types import (
    _BLANKS,
    _COLONS,
    _MAX_STEP_DIGITS,
)

# --- line heads: is the start of this line a label? -------------------------------------------


class _Label(enum.Enum):
    THOUGHT = enum.auto()
    ACTION = enum.auto()
    INPUT = enum.auto()
    ANSWER = enum.auto()
    OBSERVATION = enum.auto()

    # Members are singletons compared by identity, so identity hashing is consistent with
    # equality and skips Enum.__hash__, a Python-level call on every set or cache look-up.
    __hash__ = object.__hash__


_ALL_LABELS = frozenset(_Label)

# Order does not matter: a word only counts when a colon follows it, so "Action" cannot
# swallow "Action Input:" and "Thought" cannot swallow "Thoughts:".
_KEYWORDS: tuple[tuple[str, _Label], ...] = (
    ("final answer", _Label.ANSWER),
    ("answer", _Label.ANSWER),
    ("action input", _Label.INPUT),
    ("action", _Label.ACTION),
    ("thoughts", _Label.THOUGHT),
    ("thought", _Label.THOUGHT),
    ("observation", _Label.OBSERVATION),
)


@dataclass(frozen=True, slots=True)
class _HeadScan:
    kind: Literal["label", "json", "text", "more"]
    label: _Label | None = None
    end: int = 0
    """For a label: where its value starts in the line."""


_MORE = _HeadScan("more")
_TEXT = _HeadScan("text")
_JSON = _HeadScan("json")


def _undecided(final: bool) -> _HeadScan:
    """A head that ran out mid-label: wait for more, unless the line is already complete."""
    return _TEXT if final else _MORE


def _skip_blanks(text: str, i: int) -> int:
    while i < len(text) and text[i] in _BLANKS:
        i += 1
    return i


@dataclass(frozen=True, slots=True)
class _Keywords:
    """The keywords of one set of labels, arranged for a quick look-up."""

    by_first_letter: dict[str, tuple[tuple[str, _Label], ...]]
    """In ``_KEYWORDS`` order."""
    proper_prefixes: frozenset[str]
    """Lower-cased, with "_" for a space as well: a head that is one of these is undecided."""


def _keywords(labels: frozenset[_Label]) -> _Keywords:
    keywords = _KEYWORDS_BY_LABELS.get(labels)
    if keywords is None:
        by_first_letter: dict[str, list[tuple[str, _Label]]] = {}
        prefixes: set[str] = set()
        for word, label in _KEYWORDS:
            if label in labels:
                by_first_letter.setdefault(word[0], []).append((word, label))
                for k in range(1, len(word)):
                    prefixes.update((word[:k], word[:k].replace(" ", "_")))
        keywords = _Keywords(
            {first: tuple(words) for first, words in by_first_letter.items()}, frozenset(prefixes)
        )
        _KEYWORDS_BY_LABELS[labels] = keywords
    return keywords


_KEYWORDS_BY_LABELS: dict[frozenset[_Label], _Keywords] = {}
_LONGEST_KEYWORD = max(len(word) for word, _ in _KEYWORDS)

# What a line must start with to be anything but plain text: a blank, bold "**", a JSON "{" or
# "```", or a character whose lower case is a keyword's first letter.
_HEAD_MARKS = frozenset(_BLANKS + "*{`")
_FIRST_LETTERS = frozenset(word[0] for word, _ in _KEYWORDS)

# A complete label, ``[**] word [digits] [**] :``, in one match against the lower-cased head.
# Blanks, digits, "*", "_" and colons have no case, and str.lower() maps no character to one of
# them (letters lower-case to letters), so it only touches the keyword's letters, exactly as
# the character-by-character ``_scan_label`` does. Whatever this
# does not match (a head that ends early, a label not wanted here, "**" that never opened)
# takes the long way, which decides everything.
_BLANK_CLASS = "[" + _BLANKS + "]"
_LABEL_LINE = re.compile(
    f"{_BLANK_CLASS}*(\\*\\*{_BLANK_CLASS}*)?("
    + "|".join(re.escape(word).replace(r"\ ", "[ _]") for word, _ in _KEYWORDS)
    + f"){_BLANK_CLASS}*[0-9]{{0,{_MAX_STEP_DIGITS}}}{_BLANK_CLASS}*"
    + f"(\\*\\*{_BLANK_CLASS}*)?[{_COLONS}]"
)
_KEYWORD_LABELS = {word.replace(" ", "_"): label for word, label in _KEYWORDS} | dict(_KEYWORDS)


def _scan_head(head: str, *, labels: frozenset[_Label], json_ok: bool, final: bool) -> _HeadScan:
    """Classify a line start. Prefix-stable: a decided answer never changes with more text."""
    if not head or (head[0] in _BLANKS and not head.strip(_BLANKS)):
        return _undecided(final) if labels else _TEXT  # nothing but indentation yet
    first = head[0]
    if first not in _HEAD_MARKS and first.lower() not in _FIRST_LETTERS:
        return _TEXT  # most lines of prose
    n = len(head)
    folded = head.lower()
    exact = len(folded) == n  # else some character lower-cased to several: positions shift
    keywords = _keywords(labels)
    if exact:
        if folded in keywords.proper_prefixes:
            return _TEXT if final else _MORE  # "Act": a keyword, cut short
        # The common case: the whole label is already in the head.
        match = _LABEL_LINE.match(folded)
        if match is not None:
            opening, word, closing = match.group(1, 2, 3)
            label = _KEYWORD_LABELS[word]
            if label in labels:
                if opening is None:
                    if closing is None:  # plain "Action:", the commonest label of all
                        return _label_scan(label, match.end())
                else:
                    return _label_value(
                        head, match.end(), label, bold=True, closed=closing is not None, final=final
                    )
    i = _skip_blanks(head, 0)
    if json_ok:
        if head.startswith(("{", "```"), i):
            return _JSON
        if i < n and "```".startswith(head[i:]):
            return _undecided(final)
    if not labels:
        return _TEXT
    bold = head.startswith("**", i)
    if bold:
        i = _skip_blanks(head, i + 2)
    elif i == n - 1 and head[i] == "*":
        return _undecided(final)
    if i == n:
        return _undecided(final)
    # Only the keywords sharing the line's first letter can match.
    candidates = keywords.by_first_letter.get(head[i].lower())
    if candidates is None:
        return _TEXT
    # The possible keyword, lower-cased once; "_" stands for the space in "action_input" (and
    # elsewhere mismatches a letter, as it always did).
    window = folded[i : i + _LONGEST_KEYWORD].replace("_", " ")
    waiting = False
    for word, label in candidates:
        if exact:
            prefix = window[: len(word)]
            if not word.startswith(prefix):
                continue
            if len(prefix) < len(word):
                waiting = waiting or not final  # the head ends inside the keyword
                continue
            scan = _scan_label_tail(head, i + len(word), label, bold=bold, final=final)
        else:
            scan = _scan_label(head, i, word, label, bold=bold, final=final)
        if scan.kind == "label":
            return scan
        waiting = waiting or scan.kind == "more"
    return _MORE if waiting else _TEXT


def _scan_label(
    head: str, i: int, word: str, label: _Label, *, bold: bool, final: bool
) -> _HeadScan:
    """Match ``word [digits] [**] :`` (and a closing ``**`` after the colon) from ``i``."""
    n = len(head)
    for expected in word:
        if i == n:
            return _undecided(final)
        char = head[i].lower()
        if char != expected and not (expected == " " and char == "_"):
            return _TEXT
        i += 1
    return _scan_label_tail(head, i, label, bold=bold, final=final)


def _scan_label_tail(head: str, i: int, label: _Label, *, bold: bool, final: bool) -> _HeadScan:
    """After a label's keyword: ``[digits] [**] :`` (and a closing ``**`` after the colon)."""
    n = len(head)
    i = _skip_blanks(head, i)
    digits_start = i
    while i < n and "0" <= head[i] <= "9" and i - digits_start < _MAX_STEP_DIGITS:
        i += 1
    i = _skip_blanks(head, i)
    closed = False
    if bold and head.startswith("**", i):
        closed = True
        i = _skip_blanks(head, i + 2)
    elif bold and i == n - 1 and head[i] == "*":
        return _undecided(final)
    if i == n:
        return _undecided(final)
    if head[i] not in _COLONS:
        return _TEXT
    return _label_value(head, i + 1, label, bold=bold, closed=closed, final=final)


def _label_value(
    head: str, i: int, label: _Label, *, bold: bool, closed: bool, final: bool
) -> _HeadScan:
    """A label whose colon ends at ``i``: where does its value start?"""
    if bold and not closed:
        # "**Thought:** x": the closing ** belongs to the label, not to the value.
        n = len(head)
        after = _skip_blanks(head, i)
        if head.startswith("**", after):
            return _label_scan(label, after + 2)
        if not final and (after == n or (after == n - 1 and head[after] == "*")):
            return _MORE
    return _label_scan(label, i)


# _scan_head is pure and replies repeat their line starts ("Thought:", "Action: search[", the
# same token splits from the same model), so its answers are kept: a look-up costs a fraction of
# a scan. Bounded (heads are at most _MAX_HEAD characters); emptied when full.
_HEAD_SCANS: dict[tuple[str, frozenset[_Label], bool, bool], _HeadScan] = {}
_HEAD_SCANS_KEPT = 1024


@functools.cache
def _label_scan(label: _Label, end: int) -> _HeadScan:
    """Label results are shared: there are only so many labels and head positions."""
    return _HeadScan("label", label, end)


_STOP_LABEL = "Observation"
"""The label the stop sequence ends at (``core.prompt.STOP``)."""


def _cut_stop(head: str) -> bool:
    """The reply's last line is the start of ``Observation`` (``Obs``): the provider stopped
    inside the stop sequence, so it is the sequence's remains, not the field's text."""
    word = head.strip(_BLANKS)
    return len(word) >= 2 and _STOP_LABEL.startswith(word)
