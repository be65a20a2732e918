"""core.parser: every transcript is parsed whole, split at every boundary, and fed char by char.

Markers straddling chunk boundaries are the classic streaming bug, so each table row is
checked under every two-piece split as well as one character at a time.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

import pytest

from core.errors import ReactbotError
from core.parser import (
    Action,
    ActionFound,
    AnswerText,
    ParseError,
    ParseEvent,
    Step,
    StreamParser,
    ThoughtText,
    parse,
)


@dataclass(frozen=True)
class Case:
    id: str
    text: str
    expected: Step | str
    """The Step, or the ParseError message."""


def step(
    thought: str | None = None,
    action: tuple[str, str] | None = None,
    answer: str | None = None,
) -> Step:
    return Step(thought, Action(*action) if action else None, answer)


CASES = [
    # The prompt format.
    Case(
        "prompt-format",
        "Thought: I need the height.\nAction: search[Eiffel Tower height]",
        step("I need the height.", ("search", "Eiffel Tower height")),
    ),
    Case(
        "finish", "Thought: I know it.\nAction: finish[330 m]", step("I know it.", answer="330 m")
    ),
    Case(
        "multi-line-finish",
        "Thought: Done.\nAction: finish[line1\nline2\n\nline4]",
        step("Done.", answer="line1\nline2\n\nline4"),
    ),
    Case(
        "finish-containing-label-like-line",
        "Thought: t\nAction: finish[Summary:\nAnswer: 42]",
        step("t", answer="Summary:\nAnswer: 42"),
    ),
    Case("nested-parens", "Action: calculate[max(1,2)]", step(action=("calculate", "max(1,2)"))),
    Case("nested-brackets", "Action: search[C++ [lang]]", step(action=("search", "C++ [lang]"))),
    Case(
        "unclosed-bracket",
        "Action: search[the [ character]",
        step(action=("search", "the [ character")),
    ),
    Case(
        "text-after-bracket", "Action: search[x] and then I read it", step(action=("search", "x"))
    ),
    Case(
        "multi-line-thought-and-spacing",
        "  Thought:   first line\nsecond line\n\nAction:  Search[ x ]  ",
        step("first line\nsecond line", ("search", "x")),
    ),
    Case("lowercase-labels", "thought: t\naction: search[y]", step("t", ("search", "y"))),
    Case(
        "preamble-without-thought-label",
        "I should look.\nAction: search[x]",
        step("I should look.", ("search", "x")),
    ),
    Case(
        "repeated-thought-labels",
        "Thought: a\nThoughts: b\nAction: search[x]",
        step("a\nb", ("search", "x")),
    ),
    # Fallback shapes.
    Case("numbered-labels", "Thought 2: hmm\nAction 2: Search[x]", step("hmm", ("search", "x"))),
    Case(
        "action-input",
        "Thought: t\nAction: Search\nAction Input: Paris population",
        step("t", ("search", "Paris population")),
    ),
    Case(
        "action-input-blank-lines-json",
        'Action: search\n\n\nAction Input: {"query": "巴黎"}\n',
        step(action=("search", '{"query": "巴黎"}')),
    ),
    Case(
        "action-input-json-many-values",
        'Action: lookup\nAction Input: {"a": 1, "b": "c"}',
        step(action=("lookup", '{"a": 1, "b": "c"}')),
    ),
    Case(
        "action-input-final-answer",
        "Action: Final Answer\nAction Input: 42\nand more",
        step(answer="42\nand more"),
    ),
    Case(
        "final-answer",
        "Thought: I know.\nFinal Answer: 42\nExactly.",
        step("I know.", answer="42\nExactly."),
    ),
    Case("bare-answer", "Answer: 42", step(answer="42")),
    Case("finish-then-answer", "Thought: t\nAction: finish\nAnswer: 42", step("t", answer="42")),
    Case("markdown-bold", "**Thought:** t\n**Action**: Search[x]", step("t", ("search", "x"))),
    Case("bold-final-answer", "**Final Answer:** **42**", step(answer="**42**")),
    Case("backticked-action", "Thought: t\nAction: `search[x]`", step("t", ("search", "x"))),
    Case(
        "full-width-colons-chinese",
        "Thought：我需要查一下。\nAction：Search[北京 人口]",
        step("我需要查一下。", ("search", "北京 人口")),
    ),
    Case(
        "chinese-finish",
        "Thought: 我知道了\nAction: finish[巴黎是法国的首都。]",
        step("我知道了", answer="巴黎是法国的首都。"),
    ),
    Case("json-blob", '{"action": "search", "action_input": "x"}', step(action=("search", "x"))),
    Case(
        "json-name-arguments",
        'Thought: t\n{"name": "search", "arguments": {"query": "x"}}',
        step("t", ("search", '{"query": "x"}')),
    ),
    Case(
        "json-fenced-final-answer",
        'Thought: t\n```json\n{"action": "Final Answer", "action_input": "42"}\n```\nDone.',
        step("t", answer="42"),
    ),
    Case(
        "json-after-action-label",
        'Action:\n```json\n{"action": "search", "action_input": "x"}\n```',
        step(action=("search", "x")),
    ),
    Case(
        "code-block-in-thought",
        "Thought: see\n```py\nx = 1\n```\nAction: search[x]",
        step("see\n```py\nx = 1\n```", ("search", "x")),
    ),
    Case(
        "hallucinated-observation",
        "Thought: t\nAction: search[x]\nObservation: made up\nThought: u\nAction: finish[y]",
        step("t", ("search", "x")),
    ),
    Case(
        "observation-cuts-unclosed-bracket",
        "Action: search[x\nObservation: made up]",
        step(action=("search", "x")),
    ),
    Case(
        "observation-cuts-input",
        "Action: search\nAction Input: x\nObservation: y",
        step(action=("search", "x")),
    ),
    # Shapes real models write (issue 10): multi-line Action Input, a bare call, JSON
    # arguments holding an object, JSON-escaped line breaks.
    Case(
        "action-input-fenced-code",
        "Thought: run it\nAction: python\nAction Input: ```python\nx = 1\nprint(x)\n```",
        step("run it", ("python", "x = 1\nprint(x)")),
    ),
    Case(
        "action-input-several-lines",
        "Action: write_note\nAction Input: first line\nsecond line\n  third\nThought: done",
        step(action=("write_note", "first line\nsecond line\n  third")),
    ),
    Case(
        "action-input-code-then-observation",
        "Action: sql\nAction Input:\n```sql\nSELECT 1\nFROM t\n```\nObservation: made up",
        step(action=("sql", "SELECT 1\nFROM t")),
    ),
    Case("bare-call", "search[weather in Paris]", step(action=("search", "weather in Paris"))),
    Case("bare-call-padded", "  calculate[17*23+4]\n\n", step(action=("calculate", "17*23+4"))),
    Case("bare-call-nested", "Search[C++ [lang] news]", step(action=("search", "C++ [lang] news"))),
    Case("bare-finish", "finish[It is 42.]", step(answer="It is 42.")),
    Case(
        "bare-call-then-prose-is-thought",
        "search[x] looks right",
        "no Thought, Action or Answer label found in the reply",
    ),
    Case(
        "bare-call-then-label",
        "search[x] first\nAction: lookup[y]",
        step("search[x] first", ("lookup", "y")),
    ),
    Case(
        "json-arguments-string-object",
        '{"name": "add", "arguments": "{\\"a\\": 1, \\"b\\": 2}"}',
        step(action=("add", '{"a": 1, "b": 2}')),
    ),
    Case(
        "json-function-arguments-string",
        '```json\n{"function": {"name": "convert", "arguments": "{\\"amount\\": 3, '
        '\\"unit\\": \\"km\\"}"}}\n```',
        step(action=("convert", '{"amount": 3, "unit": "km"}')),
    ),
    Case(
        "action-input-json-string-object",
        'Action: add\nAction Input: "{\\"a\\": 1, \\"b\\": 2}"',
        step(action=("add", '{"a": 1, "b": 2}')),
    ),
    Case(
        "escaped-newlines",
        "Thought: I need the figure.\\nAction: search[Tokyo population]",
        step("I need the figure.", ("search", "Tokyo population")),
    ),
    Case(
        "escaped-newlines-answer",
        "Thought: known.\\nAction: finish[Line one.\\nLine two.]",
        step("known.", answer="Line one.\nLine two."),
    ),
    Case(
        "escaped-newline-after-a-real-one-stays",
        "Thought: print it\nAction: python[print('a\\nb')]",
        step("print it", ("python", "print('a\\nb')")),
    ),
    # Shapes real models write (issue 30): a stop sequence cut inside its label, a backslash
    # left before a label, JSON-encoded arguments holding a one-key object.
    Case(
        "stop-cut-inside-observation",
        "Thought: t\nAction: search\nAction Input: the input to the action\nObs",
        step("t", ("search", "the input to the action")),
    ),
    Case(
        "stop-cut-after-answer",
        "Thought: t\nAnswer: 42\nObservation",
        step("t", answer="42"),
    ),
    Case(
        "stop-cut-in-bracket",
        "Action: search[x]\nOb",
        step(action=("search", "x")),
    ),
    Case(
        "one-letter-last-line-stays",
        "Answer: grades\nO",
        step(answer="grades\nO"),
    ),
    Case(
        "backslash-before-answer",
        "Thought: I know it.\\Answer: 42",
        step("I know it.", answer="42"),
    ),
    Case(
        "backslash-before-bold-action",
        "Thought: look it up \\ **Action:** search[x]",
        step("look it up", ("search", "x")),
    ),
    Case(
        "backslash-before-prose-stays",
        "Thought: a\\b and C:\\Answers\nAction: finish[ok]",
        step("a\\b and C:\\Answers", answer="ok"),
    ),
    Case(
        "doubled-backslash-before-label-stays",
        "Thought: see C:\\\\Answer: x\nAction: finish[ok]",
        step("see C:\\\\Answer: x", answer="ok"),
    ),
    Case(
        "json-arguments-string-one-key-object",
        '{"name": "search", "arguments": "{\\"query\\": \\"x\\"}"}',
        step(action=("search", '{"query": "x"}')),
    ),
    # ParseError cases.
    Case("empty", "  \n ", "the reply is empty"),
    Case("thought-only", "Thought: hmm", "no Action or Answer found after the Thought"),
    Case("no-labels", "The answer is 42.", "no Thought, Action or Answer label found in the reply"),
    Case(
        "observation-before-action",
        "Thought: t\nObservation: fake\nAction: search[x]",
        "no Action or Answer found after the Thought",
    ),
    Case("finish-without-answer", "Action: finish", "the finish action has no answer"),
    Case("no-tool-name", "Action: [x]", "the Action has no tool name"),
    Case("empty-finish", "Action: finish[ ]", "the final answer is empty"),
    Case(
        "prose-action",
        "Action: I will search the web for it",
        "the Action is not a tool call: expected name[input]",
    ),
    Case(
        "input-without-action",
        "Thought: t\nAction Input: x",
        "an Action Input came before any Action",
    ),
    Case(
        "bad-json-action",
        "Action:\n{not json}",
        "the Action is neither name[input] nor a JSON tool call",
    ),
]


@dataclass(frozen=True)
class Streamed:
    thought: str
    answer: str
    actions: list[Action]
    outcome: Step | str


def stream(chunks: Iterable[str]) -> Streamed:
    parser = StreamParser()
    events: list[ParseEvent] = []
    for chunk in chunks:
        events += parser.feed(chunk)
    events += parser.close()
    try:
        outcome: Step | str = parser.result()
    except ParseError as exc:
        outcome = str(exc)
    return Streamed(
        thought="".join(e.text for e in events if isinstance(e, ThoughtText)),
        answer="".join(e.text for e in events if isinstance(e, AnswerText)),
        actions=[e.action for e in events if isinstance(e, ActionFound)],
        outcome=outcome,
    )


def assert_consistent(streamed: Streamed, expected: Step | str) -> None:
    assert streamed.outcome == expected
    if isinstance(expected, str):
        return
    assert streamed.thought.strip() == (expected.thought or "")
    assert streamed.answer.strip() == (expected.answer or "")
    assert streamed.actions == ([expected.action] if expected.action else [])


def parse_outcome(text: str) -> Step | str:
    try:
        return parse(text)
    except ParseError as exc:
        return str(exc)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_parse(case: Case) -> None:
    assert parse_outcome(case.text) == case.expected


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_stream_split_at_every_boundary(case: Case) -> None:
    for cut in range(len(case.text) + 1):
        assert_consistent(stream([case.text[:cut], case.text[cut:]]), case.expected)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_stream_one_char_at_a_time(case: Case) -> None:
    assert_consistent(stream(case.text), case.expected)


def test_parse_error_is_a_reactbot_error() -> None:
    assert issubclass(ParseError, ReactbotError)


def test_observation_marker_straddling_chunks_is_cut() -> None:
    parser = StreamParser()
    events = parser.feed("Thought: t\nAction: search[x\nObs")
    events += parser.feed("ervation: invented]\nAction: finish[no]")
    events += parser.close()
    assert events == [ThoughtText("t"), ActionFound(Action("search", "x"))]
    assert parser.result() == step("t", ("search", "x"))


def test_partial_label_is_held_back_and_text_is_live() -> None:
    parser = StreamParser()
    assert parser.feed("Thought: I need to sea") == [ThoughtText("I need to sea")]
    assert parser.feed("rch.\nAct") == [ThoughtText("rch.")]
    assert parser.feed("ion: finish[Par") == [AnswerText("Par")]
    assert parser.feed("is] trailing") == [AnswerText("is")]
    assert parser.close() == []
    assert parser.result() == step("I need to search.", answer="Paris")


def test_action_is_found_when_its_bracket_closes() -> None:
    parser = StreamParser()
    assert parser.feed("Action: search[a [b") == []
    assert parser.feed("]]") == [ActionFound(Action("search", "a [b]"))]
    assert parser.feed("\nObservation: x") == []


def test_json_tool_call_arrives_at_close() -> None:
    parser = StreamParser()
    assert parser.feed('{"name": "search", "arguments": "{\\"query\\": \\"x\\"}"}') == []
    assert parser.close() == [ActionFound(Action("search", '{"query": "x"}'))]


def test_result_before_close_is_a_bug() -> None:
    with pytest.raises(RuntimeError):
        StreamParser().result()


def test_feed_after_close_is_a_bug() -> None:
    parser = StreamParser()
    parser.close()
    with pytest.raises(RuntimeError):
        parser.feed("x")


_SOUP = (
    *("Thought", "Action", "Action Input", "Final Answer", "Answer", "Observation"),
    *(":", "：", "**", "*", "`", "```", "json", " ", "\t", "\n", "[", "]", "{", "}", ",", "2"),
    *('"action"', '"name"', '"search"', "search", "finish", "x", "中文", "_"),
    *("\\", "\\\\", "Obs"),  # a backslash before a label; a stop cut inside its label
)


def test_random_label_soup_does_not_depend_on_chunking() -> None:
    """Fragments that look like labels, brackets and fences, glued at random, then re-cut."""
    rng = random.Random(20240601)
    for _ in range(1500):
        text = "".join(rng.choice(_SOUP) for _ in range(rng.randint(1, 20)))
        whole = stream([text])
        if isinstance(whole.outcome, Step):
            assert_consistent(whole, whole.outcome)
        cuts = sorted(rng.sample(range(len(text) + 1), min(3, len(text) + 1)))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        assert stream(pieces) == whole, text
        assert stream(text) == whole, text


# Line starts the head scanner must classify exactly: case and "_" folding, characters whose
# lower case is longer than one character, indentation, digits, bold and near-miss labels.
HEAD_CASES = [
    Case(
        "uppercase-action-input-underscore",
        "THOUGHT: t\nACTION_INPUT: x",
        "an Action Input came before any Action",
    ),
    Case(
        "action-input-underscore",
        "Thought: t\nAction: search\nAction_Input: q",
        step("t", ("search", "q")),
    ),
    Case(
        "multi-char-lowercase-in-label-line",
        "Thought: İstanbul\nAction: search[İzmir]",
        step("İstanbul", ("search", "İzmir")),
    ),
    Case(
        "multi-char-lowercase-before-keyword",
        "Thought: t\nİAction: search[x]",
        "no Action or Answer found after the Thought",
    ),
    Case(
        "multi-char-lowercase-before-colon",
        "Thought: t\nAction İ: search[x]",
        "no Action or Answer found after the Thought",
    ),
    Case(
        "kelvin-sign-is-text",
        "Thought: t\n\u212aey: v\nAction: search[x]",
        step("t\n\u212aey: v", ("search", "x")),
    ),
    Case(
        "indented-numbered-bold-full-width",
        "\u3000\tThought 12: t\n   **Action 3** ： search[x]",
        step("t", ("search", "x")),
    ),
    Case(
        "blank-line-and-cut-keyword-are-text",
        "Thought: t\n    \n  Actio\nAction: search[x]",
        step("t\n    \n  Actio", ("search", "x")),
    ),
    Case(
        "too-many-step-digits",
        "Thought: t\nAction 12345: search[x]",
        "no Action or Answer found after the Thought",
    ),
    Case(
        "bold-label-colon-inside", "Thought: t\n**Action:** search[x]", step("t", ("search", "x"))
    ),
    Case(
        "closing-bold-without-opening",
        "Thought: t\nAction**: search[x]",
        "no Action or Answer found after the Thought",
    ),
    Case(
        "plural-action-is-text",
        "Thought: t\nActions: search[x]\nAction: lookup[y]",
        step("t\nActions: search[x]", ("lookup", "y")),
    ),
]


@pytest.mark.parametrize("case", HEAD_CASES, ids=[c.id for c in HEAD_CASES])
def test_line_heads_whole_split_and_char_by_char(case: Case) -> None:
    assert parse_outcome(case.text) == case.expected
    for cut in range(len(case.text) + 1):
        assert_consistent(stream([case.text[:cut], case.text[cut:]]), case.expected)
    assert_consistent(stream(case.text), case.expected)


def test_mid_line_chunks_are_emitted_as_they_come() -> None:
    parser = StreamParser()
    assert parser.feed("Thought:") == []
    assert parser.feed("  I need") == [ThoughtText("I need")]
    assert parser.feed(" more") == [ThoughtText(" more")]
    assert parser.feed("") == []
    assert parser.feed(".\nAnswer: 4") == [ThoughtText("."), AnswerText("4")]
    assert parser.feed("2") == [AnswerText("2")]
    assert parser.close() == []
    assert parser.result() == step("I need more.", answer="42")
