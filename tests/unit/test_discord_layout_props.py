"""Properties of the Components V2 layout for whatever a model, a web page or a user writes.

Every card, turned into the LayoutView discord.py sends, is a message the fake Discord
accepts (the flag, no content, at most 40 components counted at every depth, 4,000
characters of text, the shapes of types 1, 2, 9, 10, 13, 14 and 17), and our own count of it
agrees with what is sent. No text pings anyone or holds a masked link, every code block is
closed, and rendering takes bounded time and memory.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.discord.buttons import card_view
from adapters.discord.layout import (
    MAX_COMPONENTS,
    TEXT_LIMIT,
    ComponentsRenderer,
    card_size,
    hosts_line,
    sources_list,
)
from adapters.discord.payload import DiscordPayload
from adapters.discord.render import FENCE
from adapters.live import VERBOSITIES, RunView, Verbosity, fallback_text
from core.events import Finished
from core.trace import Trace, TraceStep
from tests.fakes.discord_limits import IS_COMPONENTS_V2, message_refusal
from tests.hostile import DrawnRun, hostile_text, runs, urls
from tests.unit.test_discord_render_props import HUGE, PROPERTY, bounded, huge_trace, view_of

# Renderers outside core, on drawn runs: the coverage gate is on core, and tracing
# every call of rich and Hypothesis made these six times slower.
pytestmark = pytest.mark.no_cover

_PING = re.compile(r"@(everyone|here)|<@[!&]?\d")
_MASKED = re.compile(r"\]\s*\(")


def walk(components: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every component at every depth (the accessory of a Section included)."""
    found: list[dict[str, Any]] = []
    for component in components:
        found.append(component)
        found += walk(component.get("components") or [])
        if "accessory" in component:
            found += walk([component["accessory"]])
    return found


def texts(components: list[dict[str, Any]]) -> list[str]:
    return [c["content"] for c in walk(components) if c["type"] == 10]


def check_card(payload: DiscordPayload) -> list[dict[str, Any]]:
    """The payload as discord.py sends it, accepted by the fake, counted as we count it."""
    assert payload.card is not None and payload.content == ""
    count, characters = card_size(payload)
    assert count <= MAX_COMPONENTS and characters <= TEXT_LIMIT, (count, characters)
    view = card_view("r1", 1001, payload)
    components = view.to_components()
    body = {"flags": IS_COMPONENTS_V2, "components": components}
    assert message_refusal(body, len(payload.files)) is None, message_refusal(body)
    assert len(walk(components)) == count
    assert view.content_length() == characters
    assert [c["type"] for c in components] == [17]
    for text in texts(components):
        assert not _PING.search(text), text
        assert not _MASKED.search(text), text
        assert text.count(FENCE) % 2 == 0, "a code block is left open"
    return components


@PROPERTY
@given(runs(), st.data())
def test_live_cards_fit_at_every_point_of_a_run(run: DrawnRun, data: st.DataObject) -> None:
    upto = data.draw(st.integers(min_value=1, max_value=len(run.events)))
    verbosity = data.draw(st.sampled_from(VERBOSITIES))
    view = view_of(run, upto, verbosity)
    payload = bounded(lambda: ComponentsRenderer(clock=lambda: 3.0).live(view))
    components = check_card(payload)
    custom_ids = [c.get("custom_id", "") for c in walk(components) if c["type"] == 2]
    assert any(i.startswith("reactbot:stop:") for i in custom_ids)  # Stop while it works
    deciding = any(i.startswith("reactbot:decide:") for i in custom_ids)
    assert deciding == (view.pending is not None)  # at every verbosity


@PROPERTY
@given(runs(finished=True), st.sampled_from(VERBOSITIES))
def test_final_compact_plain_and_thread_cards_fit(run: DrawnRun, verbosity: Verbosity) -> None:
    view = view_of(run, verbosity=verbosity)
    renderer = ComponentsRenderer(clock=lambda: 3.0)
    final = bounded(lambda: renderer.final(view))
    components = check_card(final)
    custom_ids = [c.get("custom_id", "") for c in walk(components) if c["type"] == 2]
    assert not any(i.startswith(("reactbot:stop:", "reactbot:decide:")) for i in custom_ids)
    assert 1 <= len(final.thread_name) <= 100
    check_card(renderer.compact(view))
    check_card(renderer.plain(fallback_text(view)))
    posts = bounded(lambda: renderer.trace_posts(run.trace))
    assert posts
    for post in posts:
        check_card(post)
    reply = bounded(lambda: renderer.trace_reply(run.trace))  # /trace
    assert len(check_card(reply)) and len(reply.files) == 2


@PROPERTY
@given(st.lists(urls, max_size=60))
def test_the_sources_button_lists_links_written_out_and_bounded(cited: list[str]) -> None:
    listed = sources_list(cited)
    assert len(listed) <= 1900
    assert not _PING.search(listed) and not _MASKED.search(listed)
    for line in listed.splitlines()[1:]:
        target = re.fullmatch(r"\d+\. <(\S+)>", line)
        if target is not None:  # a URL that cannot end early or be anything but itself
            assert target.group(1).startswith(("http://", "https://"))
            assert not re.search(r"[\s<>@()\[\]]", target.group(1))
    line = hosts_line(cited)
    assert len(line) <= 300 and not _MASKED.search(line) and "http" not in line


@PROPERTY
@given(hostile_text(max_pieces=40))
def test_any_answer_is_shown_first_and_its_rest_goes_to_the_thread(answer: str) -> None:
    trace = Trace(question="q", models=["m"], answer=answer, status="answered")
    trace.steps.append(TraceStep(1, kind="final"))
    view = RunView()
    view.apply(Finished(trace, answer, "answered"))
    final = ComponentsRenderer().final(view)
    check_card(final)
    assert final.card is not None
    first = final.card.blocks[0]
    assert type(first).__name__ == "Text"  # the answer leads; the budget never cuts it


def test_huge_inputs_render_in_bounded_time_and_memory() -> None:
    big, trace = HUGE, huge_trace()
    trace.cited += [f"https://site{n}.example/x" for n in range(200)]
    view = RunView()
    view.apply(Finished(trace, big, "answered"))
    renderer = ComponentsRenderer()
    check_card(bounded(lambda: renderer.final(view), seconds=10, megabytes=200))
    posts = bounded(lambda: renderer.trace_posts(trace), seconds=20, megabytes=400)
    for post in posts:
        check_card(post)
    check_card(bounded(lambda: renderer.trace_reply(trace), seconds=20, megabytes=400))
    listed = sources_list(trace.cited)
    assert listed.endswith("more in the trace") and len(listed) <= 1900
