"""The web chat's commands in headless Chromium (Playwright): under an answer 👍 tells the
person it is kept, Usage and Last trace show the shared words, and a hostile question comes
back in the trace as text, never as markup. No console error."""

from __future__ import annotations

from typing import Any

import pytest

from adapters import words
from core.scripted import Turn
from tests.integration.test_trace_page_browser import chromium  # noqa: F401 - a fixture
from tests.integration.test_web_chat import Chat, make  # noqa: F401 - a fixture

pytestmark = pytest.mark.slow

HOSTILE = '<img src=x onerror="window.owned=1">what is 2+2?'


async def test_votes_usage_and_the_last_trace_in_headless_chromium(
    chromium: str,  # noqa: F811 - the fixture
    make: Any,  # noqa: F811 - the fixture
) -> None:
    from playwright.async_api import async_playwright

    c: Chat = await make([Turn("Thought: easy.\nFinal Answer: 4")])
    problems: list[str] = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=chromium, headless=True, args=["--no-sandbox"]
        )
        try:
            page = await browser.new_page()
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}"))
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            await page.goto(c.url + "/", wait_until="load")
            box = page.get_by_label("Your question")
            await box.fill(HOSTILE)
            await box.press("Enter")
            await page.locator(".answer").wait_for()
            await page.get_by_role("button", name="A good answer").click()
            await page.locator("li.note", has_text=words.vote_kept("up")).wait_for()
            await page.get_by_role("button", name="Usage").click()
            await page.locator("li.note", has_text="You have used").wait_for()
            await page.get_by_role("button", name="Last trace").click()
            shown = page.locator("pre.trace-text")
            await shown.wait_for()
            assert HOSTILE in (await shown.text_content() or "")  # as text
            assert await page.evaluate("window.owned") is None, "no markup ran"
            assert await page.locator("img[src=x]").count() == 0
        finally:
            await browser.close()
    trace = (await c.chat.stores.traces.recent())[0]
    assert [v.value for v in trace.votes] == ["up"]
    assert problems == []
