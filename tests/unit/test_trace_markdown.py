"""The Markdown of a trace, read by a real CommonMark parser (markdown-it-py): every labelled
line lands in a paragraph of its own, so no renderer runs them together on one line."""

from __future__ import annotations

from markdown_it import MarkdownIt

from core.trace import ApprovalRecord, Trace, TraceAttachment, TraceStep


def _paragraphs(markdown: str) -> list[str]:
    tokens = MarkdownIt("commonmark").parse(markdown)
    return [
        tokens[i + 1].content
        for i, token in enumerate(tokens)
        if token.type == "paragraph_open" and tokens[i + 1].type == "inline"
    ]


def _full_trace() -> Trace:
    step = TraceStep(
        index=1,
        thought="I need the product.",
        action="calculate",
        action_input="6*7",
        observation="42",
        error="calculate: slow",
        sources=["https://example.org/a"],
        started_at=10.0,
        ended_at=10.5,
        approval=ApprovalRecord("approved", by="ada"),
        attachments=[TraceAttachment("image/png", 9, None, "a")],
    )
    retry = TraceStep(index=2, kind="format_error", raw="garbled", error="no Action line")
    final = TraceStep(index=2, thought="Done.")
    return Trace(
        question="What is 6*7?",
        steps=[step, retry, final],
        answer="42",
        status="answered",
        reason="a reason",
        stopped_by="ada",
    )


def test_every_labelled_line_is_a_paragraph_of_its_own() -> None:
    paragraphs = _paragraphs(_full_trace().to_markdown())
    labels = [p.split(":**", 1)[0] + ":**" for p in paragraphs if p.startswith("**")]
    assert labels == [
        "**Question:**",
        "**Thought:**",
        "**Action:**",
        "**Approval:**",
        "**Observation:**",
        "**Error:**",
        "**Sources:**",
        "**Attachments:**",
        "**Error:**",
        "**Raw reply:**",
        "**Thought:**",
        "**Answer (answered):**",
        "**Reason:**",
        "**Stopped by:**",
        "**Sources:**",
    ]
    # each paragraph holds one label: none was run together with the next line
    assert all(p.count(":**") == 1 for p in paragraphs if p.startswith("**"))
    assert paragraphs[-1].startswith("2 steps")  # the summary line stands alone too


def test_a_multi_line_thought_stays_apart_from_the_action() -> None:
    step = TraceStep(index=1, thought="first line\nsecond line", action="search", action_input="x")
    paragraphs = _paragraphs(Trace(question="q", steps=[step]).to_markdown())
    assert "**Thought:** first line\nsecond line" in paragraphs
    assert "**Action:** search[x]" not in paragraphs  # the input is inline code, kept as such
    assert any(p.startswith("**Action:**") for p in paragraphs)


def test_observations_stay_fenced_code_blocks() -> None:
    tokens = MarkdownIt("commonmark").parse(_full_trace().to_markdown())
    fences = [t.content for t in tokens if t.type == "fence"]
    assert fences == ["42\n", "garbled\n"]
