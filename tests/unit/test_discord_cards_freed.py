"""A card sent in an edit or a trace post is freed by reference counting, not left as a cycle
for the garbage collector (issue 46: each live edit builds one, and those still in flight at
a young collection reached the oldest generation, where an ended run's stayed for minutes)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
from discord.ui.view import ViewStore

from adapters.discord.buttons import card_view
from adapters.discord.payload import (
    Card,
    DiscordPayload,
    PendingButtons,
    Rule,
    SourcesSection,
    Text,
)
from adapters.discord.surface import CardView, release_view


def _card() -> CardView:
    """A card with every kind of block, the decision buttons and Stop."""
    blocks = (Text("Thinking…"), Rule(), SourcesSection("1. https://example.com"), Text("42"))
    payload = DiscordPayload(
        content="",
        card=Card(0x5865F2, blocks),
        approval=PendingButtons(step=1, call=0, remember=True, json_input=False),
    )
    return card_view("run1", 1001, payload)


@pytest.fixture
def no_collector() -> Iterator[None]:
    """Only reference counting frees anything meanwhile."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def test_a_sent_card_goes_with_its_last_reference(no_collector: None) -> None:
    view = _card()
    store = ViewStore(state=None)  # type: ignore[arg-type]
    store.add_view(view, 1234)  # what discord.py does with the view of a message it sent
    assert not store._views and not store._synced_message_views, "the store keeps none of it"
    parts = [weakref.ref(view), *(weakref.ref(item) for item in view.walk_children())]
    assert len(parts) > 10

    release_view(view)
    del view
    assert [part for part in parts if part() is not None] == []


async def test_a_card_left_as_built_waits_for_the_collector(no_collector: None) -> None:
    """Why the release is needed: discord.py's items and their views refer to each other."""
    view = _card()
    gone = weakref.ref(view)
    del view
    assert gone() is not None
    gc.collect()
    assert gone() is None
