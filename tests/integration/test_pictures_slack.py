"""A tool's picture on Slack: uploaded into the answer's thread with
files.getUploadURLExternal and files.completeUploadExternal (the real slack_sdk
``files_upload_v2`` against the strict fake, which needs ``files:write``); without the scope,
one line says so."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapters import words
from core.tools import ToolRegistry
from tests.fakes.slack_server import message_text
from tests.integration import test_slack_files
from tests.integration.test_pictures_telegram import CHART, PNG, TURNS
from tests.integration.test_slack_app import CHANNEL
from tests.integration.test_slack_files import mention, tools

served = test_slack_files.served


def _registry() -> ToolRegistry:
    registry = tools()
    registry.add(CHART)
    return registry


async def test_a_tools_picture_is_uploaded_into_the_answers_thread(
    served: Callable[..., Any],
) -> None:
    h, traces, _ = await served(TURNS, registry=_registry())
    await h.event(mention("chart the sales", []), event_id="EvP1")
    await h.settled()
    root = h.root()
    pictures = [f for f in h.fake.shared_files if f["filename"].startswith("picture-")]
    assert [(f["filename"], f["data"]) for f in pictures] == [("picture-1.png", PNG)]
    assert pictures[0]["channel_id"] == CHANNEL and pictures[0]["thread_ts"] == root.ts
    trace = await traces.last(f"slack:T0TEAM:{CHANNEL}:{root.ts}")
    assert trace is not None and trace.answer == "Here is the chart."


async def test_without_files_write_the_thread_says_the_pictures_are_in_the_trace(
    served: Callable[..., Any],
) -> None:
    h, _, _ = await served(TURNS, registry=_registry())
    h.fake.scopes.discard("files:write")
    await h.event(mention("chart the sales", []), event_id="EvP2")
    await h.settled()
    assert h.fake.shared_files == []
    said = [message_text(m) for m in h.fake.messages.values()]
    assert any(words.PICTURES_NOT_SENT in text for text in said)
