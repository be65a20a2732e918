"""The web chat's Memory panel in a real browser (Debian's headless Chromium driven by
Playwright) at 360 px, against the chat served over real HTTP.

A person opens the panel, asks a question whose run remembers two facts (one of them
hostile markup and a link), sees the open panel fill in when the answer ends, reads the
facts as plain text (no element, no link made from them), deletes one, then deletes all
(asked twice). The store agrees at each step; nothing fires, no console error, no request
leaves the page's origin, nothing is wider than the screen. Screenshots go to
``$REACTBOT_ARTIFACTS/memory-panel/`` (default ``artifacts/``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from adapters import words
from adapters.web.chat import COOKIE
from core.memories import Holder, InMemoryMemories, Memories
from tests.integration.test_trace_page_browser import ROOT, chromium  # noqa: F401 - a fixture
from tests.integration.test_web_chat import Chat, make  # noqa: F401 - a fixture

pytestmark = pytest.mark.slow

HOSTILE = "<img src=x onerror=alert(1)> [Verify](https://evil.example/login) @everyone"
PLAIN = "call me Ada, see https://evil.example/ada"
TURNS = [
    f'Thought: keep it\nAction: remember[{{"fact": "{HOSTILE}"}}]',
    f'Thought: and this\nAction: remember[{{"fact": "{PLAIN}"}}]',
    "Thought: kept\nFinal Answer: Noted both.",
]


@pytest.fixture
def artifacts() -> Path:
    folder = Path(os.environ.get("REACTBOT_ARTIFACTS", ROOT / "artifacts")) / "memory-panel"
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nmemory panel screenshots: {folder}", file=sys.stderr)
    return folder


async def test_a_person_sees_and_deletes_memories_in_the_panel(
    chromium: str,  # noqa: F811 - the fixture
    artifacts: Path,
    make: Any,  # noqa: F811 - the fixture
) -> None:
    from playwright.async_api import async_playwright

    c: Chat = await make(TURNS)
    memories = Memories(InMemoryMemories())
    c.chat.answering.agent.memories = memories
    requests: list[str] = []
    problems: list[str] = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=chromium, headless=True, args=["--no-sandbox"]
        )
        try:
            for scheme in ("light", "dark"):
                await look(browser, c, scheme, requests, problems, artifacts)
            context = await browser.new_context(viewport={"width": 360, "height": 800})
            context.on("request", lambda r: requests.append(r.url))
            page = await context.new_page()
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}"))
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("dialog", lambda d: problems.append(f"a dialog opened: {d.message}"))
            await page.goto(c.url + "/", wait_until="load")
            panel = page.locator("#memory")
            opener = page.get_by_role("button", name="🧠 Memory")
            assert await panel.is_hidden()
            await opener.click()
            assert await opener.get_attribute("aria-expanded") == "true"
            said = page.locator("#memory-said")
            await page.wait_for_function(
                "t => document.getElementById('memory-said').textContent === t",
                arg=words.MEMORY_NONE,
            )
            assert await page.locator("#memory-clear").is_hidden()

            # The run remembers two facts; the open panel re-reads when the answer ends.
            box = page.get_by_label("Your question")
            await box.fill("remember these")
            await box.press("Enter")
            await page.locator("li.turn .footer").wait_for()
            items = panel.locator("li.memory-item")
            await page.wait_for_function(
                "() => document.querySelectorAll('#memory li.memory-item').length === 2"
            )
            texts = await panel.locator(".memory-text").all_inner_texts()
            assert texts == [PLAIN, HOSTILE], "newest first, shown exactly as told"
            assert await panel.locator("img, a, script, iframe").count() == 0, "text, not markup"
            assert await said.inner_text() == words.memory_header(2)
            meta = await panel.locator(".memory-meta").first.inner_text()
            assert meta.startswith("m") and "yours" in meta
            await page.screenshot(path=artifacts / "panel-360.png", full_page=True)
            await fits(page, 360)

            # Delete one: gone from the page and from the store.
            person = await browsing(c, context)
            (newest, oldest) = await memories.store.list(person)
            await page.get_by_role("button", name=f"Delete memory {newest.id}").click()
            await page.wait_for_function(
                "() => document.querySelectorAll('#memory li.memory-item').length === 1"
            )
            assert await said.inner_text() == words.memory_forgotten(newest.id)
            assert [m.id for m in await memories.store.list(person)] == [oldest.id]

            # Delete all: asked twice, then the store is empty.
            clear = page.locator("#memory-clear")
            await clear.click()
            assert await clear.inner_text() != "Delete all", "the first press asks to confirm"
            assert [m.id for m in await memories.store.list(person)] == [oldest.id]
            await clear.click()
            await page.wait_for_function(
                "t => document.getElementById('memory-said').textContent === t",
                arg=words.memory_cleared(1, "me"),
            )
            assert await items.count() == 0 and await clear.is_hidden()
            assert await memories.store.list(person) == []

            await page.get_by_role("button", name="Close the memory panel").click()
            assert await panel.is_hidden()
            assert await page.evaluate("document.activeElement.id") == "memory-open"
            await context.close()
        finally:
            await browser.close()
    strangers = [u for u in requests if not u.startswith(c.url + "/")]
    assert strangers == [], f"requests left the page's origin: {strangers}"
    assert problems == []
    c.model.assert_complete()


async def look(
    browser: Any, c: Chat, scheme: str, requests: list[str], problems: list[str], folder: Path
) -> None:
    """The open panel with a long unbroken memory at 360 px fits the screen."""
    context = await browser.new_context(viewport={"width": 360, "height": 800}, color_scheme=scheme)
    context.on("request", lambda r: requests.append(r.url))
    page = await context.new_page()
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    await page.goto(c.url + "/", wait_until="load")
    await page.route(  # a listing as the server words it, with one very long word in it
        c.url + "/api/memory",
        lambda route: route.fulfill(
            json={
                "enabled": True,
                "text": words.memory_header(1),
                "memories": [
                    {
                        "id": "m0123abcd",
                        "text": "x" * 400 + " " + HOSTILE,
                        "scope": "yours",
                        "at": 1.7e9,
                    }
                ],
            }
        ),
    )
    await page.get_by_role("button", name="🧠 Memory").click()
    await page.locator("#memory li.memory-item").wait_for()
    await fits(page, 360)
    await page.screenshot(path=folder / f"long-360-{scheme}.png", full_page=True)
    await context.close()


async def fits(page: Any, width: int) -> None:
    scroll = await page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width, f"{scroll} px wide at a {width} px viewport"
    box = await page.get_by_role("button", name="Delete", exact=False).first.bounding_box()
    assert box is not None and box["x"] + box["width"] <= width, "Delete is on the screen"


async def browsing(c: Chat, context: Any) -> Holder:
    """The person whose memories the browser's session holds (its cookie's session)."""
    (cookie,) = [k for k in await context.cookies() if k["name"] == COOKIE]
    session = c.chat.sessions.from_cookie(cookie["value"])
    assert session is not None
    return Holder.person("web", session.id)
