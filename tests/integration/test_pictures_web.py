"""A tool's picture in the web chat: the final state carries it as a ``data:`` URL the server
made from bytes it checked (never the tool's claimed type), which the page's policy lets an
``<img>`` show (``img-src 'self' data:``) and nothing else run."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from tests.integration import test_web_chat
from tests.integration.test_pictures_telegram import CHART, PNG, TURNS
from tests.integration.test_web_chat import Chat

make = test_web_chat.make
events = test_web_chat.events


async def test_a_tools_picture_is_in_the_final_state_as_an_image(
    make: Any, events: Callable[[Chat], Any]
) -> None:
    c: Chat = await make(TURNS, extra_tools=[CHART])
    stream = await events(c)
    status, _ = await c.ask("chart the sales")
    assert status == 202  # accepted: the answer comes on the event stream
    final = await stream.until(lambda d: d.get("type") == "run" and d.get("final") is True)
    assert final["pictures"] == [f"data:image/png;base64,{base64.b64encode(PNG).decode()}"]
    async with c.http.get(c.url + "/") as page:
        policy = page.headers["Content-Security-Policy"]
    assert "img-src 'self' data:;" in policy and "script-src 'self';" in policy
