"""A tool's picture on Telegram: the image an MCP tool returns (here a tool returning the
same ``Attachment`` an MCP image block becomes) is sent with sendPhoto under the answer,
listed in the trace, and never shown to the model as bytes; what is no image by its bytes, or
is larger than ``files.max_bytes``, stays in the trace only."""

from __future__ import annotations

import base64
from typing import Any

from core.scripted import Turn
from core.tools import Attachment, FunctionTool, ToolHints, ToolResult
from tests.integration import test_telegram_bot
from tests.integration.test_telegram_bot import CHAT, Harness

make = test_telegram_bot.make

PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)
FAKE_PNG = b"<svg onload=alert(1)>"  # claims image/png


async def _chart(arg: str) -> ToolResult:
    images = (
        Attachment("image/png", base64.b64encode(PNG).decode()),
        Attachment("image/png", base64.b64encode(FAKE_PNG).decode()),
    )
    return ToolResult(
        "[image: image/png, 72 bytes]\n[image: image/png, 21 bytes]", attachments=images
    )


CHART = FunctionTool(
    "chart", _chart, "Draws a chart.", "chart[sales]", hints=ToolHints(read_only=True)
)
TURNS = [
    Turn("Thought: draw it.\nAction: chart[sales]"),
    Turn("Thought: done.\nFinal Answer: Here is the chart."),
]


async def test_a_tools_picture_is_sent_under_the_answer_and_a_fake_one_is_not(make: Any) -> None:
    h: Harness = await make(TURNS, extra_tools=[CHART])
    final = await h.answer_to(h.fake.user_says(CHAT, "chart the sales"))
    await h.bot.answering.settled()
    assert "Here is the chart." in final.text
    assert h.fake.photos == [(CHAT, PNG)]  # the SVG claiming image/png is not sent
    (photo,) = [m for m in h.fake.bot_messages(CHAT) if m.photo]
    assert photo.reply_to == final.id
    second = h.model.calls[1].messages
    assert all("iVBOR" not in str(m.get("content")) for m in second)  # no base64 to the model
    trace = (await h.stores.traces.list(f"telegram:{CHAT}"))[0]
    assert [a.mime_type for a in trace.steps[0].attachments] == ["image/png", "image/png"]
    assert "attachment (image/png, 72 bytes)" in trace.to_markdown()
    assert h.fake.refused() == []
