"""The Components V2 layout (``discord.layout: components``): cards from a run's state, and
what the fake Discord refuses in such a message. Pure: no Discord."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.discord.layout import (
    AMBER,
    BLUE,
    GREEN,
    GREY,
    RED,
    ComponentsRenderer,
    Rule,
    SourcesSection,
    Text,
    card_size,
    sources_list,
)
from core.events import (
    ActionDecided,
    ApprovalRequested,
    Cancelled,
    Failed,
    Finished,
    ObservationReady,
    RunStarted,
    StepStarted,
    ThoughtDelta,
)
from tests.fakes.discord_limits import IS_COMPONENTS_V2, message_refusal
from tests.unit.test_discord_layout_props import check_card, walk
from tests.unit.test_discord_render import finished_trace, started, view_with


def texts_of(payload: Any) -> list[str]:
    return [b.content for b in payload.card.blocks if isinstance(b, Text | SourcesSection)]


def renderer() -> ComponentsRenderer:
    return ComponentsRenderer(clock=lambda: 103.4)


def test_the_live_card_is_a_container_with_status_steps_separator_current_step_and_stop() -> None:
    view = view_with(
        *started(),
        ThoughtDelta(1, "x"),
        ActionDecided(1, "calculate", "6*7"),
        ObservationReady(1, "calculate", "42"),
        StepStarted(2, 8),
        ThoughtDelta(2, "I need the current population figure"),
    )
    payload = renderer().live(view)
    assert payload.content == "" and payload.card is not None
    assert payload.card.accent == BLUE
    blocks = payload.card.blocks
    assert blocks[0] == Text("🤔 Thinking · step 2/8 · 3.4 s")
    assert blocks[1] == Text("-# 1 · calculate `6*7` → 42")
    assert isinstance(blocks[2], Rule)
    assert blocks[3] == Text("**Thought** I need the current population figure▍")
    components = check_card(payload)
    container = components[0]
    assert container["type"] == 17 and container["accent_color"] == BLUE
    row = container["components"][-1]
    assert row["type"] == 1 and row["components"][0]["custom_id"] == f"reactbot:stop:r1:{1001}"


@pytest.mark.parametrize(
    ("events", "accent"),
    [
        ((ThoughtDelta(1, "t"),), BLUE),
        ((ActionDecided(1, "search", "q"),), AMBER),
        ((ApprovalRequested(1, 0, "save", "x", "t", 30.0),), AMBER),
    ],
)
def test_the_accent_says_the_phase_while_it_works(events: tuple[object, ...], accent: int) -> None:
    payload = renderer().live(view_with(*started(), *events))
    assert payload.card is not None and payload.card.accent == accent


def test_the_accent_says_how_it_ended() -> None:
    trace = finished_trace()
    answered = view_with(*started(), Finished(trace, "395", "answered"))
    failed = view_with(*started(), Failed(trace, "The model did not answer in 60 s.", "timeout"))
    stopped = view_with(*started(), Cancelled(trace, "ada"))
    accents = [renderer().final(v).card.accent for v in (answered, failed, stopped)]  # type: ignore[union-attr]
    assert accents == [GREEN, RED, GREY]


def test_many_steps_collapse_into_one_line_within_40_components_and_4000_characters() -> None:
    events: list[object] = [RunStarted("r", "q", "m", 200)]
    for n in range(1, 121):
        events += [
            StepStarted(n, 200),
            ThoughtDelta(n, "t" * 50),
            ActionDecided(n, "search", f"query {n} " + "w" * 80),
            ObservationReady(n, "search", "result " * 40),
        ]
    events += [StepStarted(121, 200), ThoughtDelta(121, "still going " * 400)]
    payload = renderer().live(view_with(*events))
    count, characters = card_size(payload)
    assert count <= 40 and characters <= 4000
    texts = texts_of(payload)
    assert texts[1].startswith("-# … ") and texts[1].endswith("earlier steps")
    assert texts[2].startswith("-# ") and "query 120" in texts[-2]  # the latest kept
    assert texts[-1].startswith("**Thought** ")
    check_card(payload)


def test_a_pending_approval_shows_its_buttons_in_the_action_row_with_stop() -> None:
    view = view_with(
        *started(),
        ThoughtDelta(1, "delete the draft"),
        ApprovalRequested(
            1,
            0,
            "files_delete",
            '{"path": "q3.md"}',
            "delete it",
            300.0,
            json_input=True,
            remember=True,
        ),
    )
    payload = renderer().live(view)
    assert payload.card is not None and payload.card.accent == AMBER
    assert "✋ Waiting for approval" in texts_of(payload)[0]
    components = check_card(payload)
    ids = [c["custom_id"] for c in walk(components) if c["type"] == 2]
    verdicts = [i.split(":")[5] for i in ids if i.startswith("reactbot:decide:")]
    assert verdicts == ["approve", "edit", "deny", "always"]
    assert ids[-1].startswith("reactbot:stop:")


def test_the_finished_card_shows_answer_sources_with_their_button_and_subtext() -> None:
    trace = finished_trace("In 2022 Messi scored twice.")
    trace.cited = ["https://www.fifa.com/x", "https://en.wikipedia.org/wiki/Messi"]
    view = view_with(*started(), Finished(trace, trace.answer, "answered"))
    payload = renderer().final(view)
    assert payload.card is not None and payload.stop_button == "remove"
    blocks = payload.card.blocks
    assert blocks[0] == Text("In 2022 Messi scored twice.")
    assert isinstance(blocks[1], Rule)
    assert blocks[2] == SourcesSection("-# Sources: fifa.com · en.wikipedia.org")
    assert isinstance(blocks[3], Text)
    assert blocks[3].content == (
        "-# ✅ 2 steps · 6.1 s · 620 tokens · text mode · `scripted` · trace in thread ↓"
    )
    components = check_card(payload)
    section = next(c for c in walk(components) if c["type"] == 9)
    assert section["accessory"]["custom_id"] == "reactbot:sources:r1"
    assert not any(c.get("custom_id", "").startswith("reactbot:stop:") for c in walk(components))


def test_a_long_answer_leads_the_card_and_goes_on_in_the_thread() -> None:
    answer = "\n".join(f"line {i} " + "z" * 70 for i in range(200))
    trace = finished_trace(answer)
    view = view_with(*started(), Finished(trace, answer, "answered"))
    payload = renderer().final(view)
    texts = texts_of(payload)
    assert texts[0].startswith("line 0 ") and len(texts[0]) <= 3000
    assert "the answer goes on in the thread" in texts[-1]
    posts = renderer().trace_posts(trace)
    shown = "".join(texts[0].split()) + "".join(
        "".join(texts_of(p)[0].split()) for p in posts[: len(posts) - 4]
    )
    assert "".join(answer.split()) == shown  # nothing lost between the card and the thread
    check_card(payload)


def test_each_step_in_the_thread_is_a_container_and_the_json_is_a_file_component() -> None:
    trace = finished_trace(steps=3)
    trace.steps[0].error = "boom"
    posts = renderer().trace_posts(trace)
    cards = [p.card for p in posts]
    assert all(c is not None for c in cards)
    accents = [c.accent for c in cards]  # type: ignore[union-attr]
    assert accents == [GREY, RED, AMBER, BLUE, GREEN]  # question, steps 1-3, totals
    step = cards[1].blocks[0]  # type: ignore[union-attr]
    assert isinstance(step, Text) and step.content.startswith("**Step 1**\n-# 1.00 s · 620 tokens")
    totals = check_card(posts[-1])
    files = [c for c in walk(totals) if c["type"] == 13]
    assert files == [
        {"type": 13, "file": {"url": f"attachment://trace-{trace.id}.json"}, "spoiler": False}
    ] or [f["file"]["url"] for f in files] == [f"attachment://trace-{trace.id}.json"]


def test_the_sources_list_writes_links_out_and_defuses_what_could_ping_or_mask() -> None:
    listed = sources_list(
        [
            "https://en.wikipedia.org/wiki/Mercury_(planet)",
            "https://evil.example/@everyone](https://x)",
            "javascript:alert(1)",
        ]
    )
    assert listed.splitlines() == [
        "**Sources**",
        "1. <https://en.wikipedia.org/wiki/Mercury_%28planet%29>",
        "2. <https://evil.example/%40everyone%5D%28https://x%29>",
    ]
    assert sources_list([]) == "This answer cites no web sources."


# ---- what the fake refuses ----------------------------------------------------------------


def v2(*components: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"flags": IS_COMPONENTS_V2, "components": list(components), **extra}


def text(content: str) -> dict[str, Any]:
    return {"type": 10, "content": content}


def errors_of(body: dict[str, Any], existing: dict[str, Any] | None = None) -> dict[str, Any]:
    found = message_refusal(body, existing=existing)
    assert found is not None and found.status == 400 and found.body["code"] == 50035
    errors: dict[str, Any] = found.body["errors"]
    return errors


def test_the_fake_refuses_content_or_embeds_beside_the_flag() -> None:
    errors = errors_of(v2(text("hi"), content="hello"))
    assert errors["content"]["_errors"][0]["code"] == (
        "MESSAGE_CANNOT_USE_LEGACY_FIELDS_WITH_COMPONENTS_V2"
    )
    assert "embeds" in errors_of(v2(text("hi"), embeds=[{"title": "x"}]))
    # an edit that sets the flag on a message with content must reset it to null
    existing = {"content": "⏳ Starting…", "flags": 0}
    assert "content" in errors_of(v2(text("hi")), existing)
    assert message_refusal(v2(text("hi"), content=None), existing=existing) is None
    # once set, the flag holds: content on a later edit is refused even without it
    assert "content" in errors_of({"content": "plain"}, {"flags": IS_COMPONENTS_V2})


def test_the_fake_counts_components_at_every_depth_and_text_across_them() -> None:
    container = {"type": 17, "components": [text("x")] * 39}
    assert message_refusal(v2(container)) is None  # 40 with the container
    errors = errors_of(v2({"type": 17, "components": [text("x")] * 40}))
    assert errors["components"]["_errors"][0]["message"] == "Must be 40 or fewer in length."
    assert message_refusal(v2(text("a" * 2000), text("b" * 2000))) is None
    errors = errors_of(v2(text("a" * 2000), text("b" * 2001)))
    assert errors["components"]["_errors"][0]["message"] == "Must be 4000 or fewer in length."


@pytest.mark.parametrize(
    ("component", "path"),
    [
        ({"type": 10, "content": ""}, ("0", "content")),
        ({"type": 10}, ("0", "content")),
        ({"type": 9, "components": [text("x")]}, ("0", "accessory")),
        ({"type": 9, "components": [], "accessory": {"type": 2}}, ("0", "components")),
        (
            {
                "type": 9,
                "components": [text("x")] * 4,
                "accessory": {"type": 2, "style": 2, "custom_id": "a"},
            },
            ("0", "components"),
        ),
        ({"type": 14, "spacing": 3}, ("0", "spacing")),
        ({"type": 17, "accent_color": 0x1000000, "components": [text("x")]}, ("0", "accent_color")),
        (
            {"type": 17, "components": [{"type": 17, "components": [text("x")]}]},
            ("0", "components", "0", "type"),
        ),
        (
            {"type": 1, "components": [{"type": 2, "style": 1, "custom_id": "x" * 101}]},
            ("0", "components", "0", "custom_id"),
        ),
        ({"type": 4, "custom_id": "x", "style": 1}, ("0", "type")),
    ],
)
def test_the_fake_refuses_malformed_components(
    component: dict[str, Any], path: tuple[str, ...]
) -> None:
    node: Any = errors_of(v2(component))["components"]
    for key in path:
        node = node[key]
    assert node["_errors"]


def test_the_fake_refuses_a_custom_id_used_twice() -> None:
    button = {"type": 2, "style": 2, "custom_id": "same", "label": "x"}
    errors = errors_of(v2({"type": 1, "components": [button, button]}))
    assert errors["components"]["_errors"][0]["code"] == "COMPONENT_CUSTOM_ID_DUPLICATED"


def test_the_thread_ends_with_the_trace_pages_link_in_a_card() -> None:
    trace = finished_trace("42")
    link = "https://bot.example/t/abc?exp=1&sig=x"
    posts = ComponentsRenderer(trace_link=lambda trace_id: link).trace_posts(trace)
    last = posts[-1]
    check_card(last)
    assert last.card is not None
    assert last.card.blocks == (Text(f"-# 📄 Full trace page: <{link}>"),)
    plain = ComponentsRenderer().trace_posts(trace)
    assert len(plain) == len(posts) - 1, "no link without a signer"
    answer_only = ComponentsRenderer(trace_link=lambda _: link).trace_posts(trace, steps=False)
    assert all(post.card != last.card for post in answer_only), "an answer-only thread: no link"
