"""The web chat's Retry in a real browser (headless Chromium, Playwright): a page whose
answer's process died shows it interrupted, with a Retry button; a press asks the question
again, once (the button is spent, and after a reload a second press says so); no console
error."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from adapters import words
from adapters.recovery import INTERRUPTED
from adapters.web.chat import COOKIE
from core.scripted import Turn
from core.stores import RunRecord
from core.trace import Trace
from tests.integration.test_trace_page_browser import chromium  # noqa: F401 - a fixture
from tests.integration.test_web_chat import Chat, make  # noqa: F401 - a fixture

pytestmark = pytest.mark.slow


async def test_an_interrupted_answer_is_asked_again_once_from_its_retry_button(
    chromium: str,  # noqa: F811 - the fixture
    make: Any,  # noqa: F811 - the fixture
) -> None:
    from playwright.async_api import async_playwright

    c: Chat = await make([Turn("Thought: easy.\nFinal Answer: all is well")], run_lease=1.0)
    problems: list[str] = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=chromium, headless=True, args=["--no-sandbox"]
        )
        try:
            context = await browser.new_context(viewport={"width": 360, "height": 800})
            page = await context.new_page()
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}"))
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            await page.goto(c.url + "/", wait_until="load")
            await page.get_by_label("Your question").wait_for()
            cookie = next(k["value"] for k in await context.cookies() if k["name"] == COOKIE)
            session = c.chat.sessions.from_cookie(cookie)
            assert session is not None

            # What a process killed mid-answer left for this session: its record, silent;
            # this process's sweep finishes it (run_lease 1 s), then the page is reloaded.
            trace = Trace(question="what is up?", conversation=session.conversation, id="dead",
                          started_at=time.time() - 5)  # fmt: skip
            record = RunRecord("dead", "web", session.conversation, "gone", {"session": session.id},
                               trace=trace.to_json())  # fmt: skip
            await c.chat.stores.runs.beat([record], at=time.time() - 600)
            async with asyncio.timeout(10):
                while await c.chat.stores.traces.get("dead") is None:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            await page.reload(wait_until="load")
            turn = page.locator("li.turn", has_text="what is up?")
            await turn.locator(".outcome", has_text="Interrupted").wait_for()
            assert await turn.locator(".outcome").inner_text() == INTERRUPTED
            retry = turn.get_by_role("button", name="Retry")
            await retry.click()
            answered = page.locator("li.turn", has_text="all is well")
            await answered.locator(".footer").wait_for()
            assert await retry.is_disabled(), "spent"

            await page.reload(wait_until="load")  # the stored turn keeps its button
            again = page.locator("li.turn", has_text="what is up?").get_by_role("button")
            await again.filter(has_text="Retry").click()
            await page.get_by_role("alert").filter(has_text=words.RETRY_DONE).wait_for()
            assert len(c.model.calls) == 1, "asked again once"
        finally:
            await browser.close()
    assert problems == [] or all("409" in p for p in problems), problems
