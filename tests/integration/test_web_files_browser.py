"""The web chat's attach control in headless Chromium (Playwright), against the chat served
over real HTTP with files on: a person picks a file with the 📎 button and drops another on
the page, sees each name (a hostile one as plain text) and can take one back, sends the
question, and gets the answer from the file; the refused one gets its line. No console error, no request leaves the page's origin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import bot
from core.files import FileLimits
from core.knowledge import LookupTool
from core.scripted import Turn
from tests.integration.test_trace_page_browser import chromium  # noqa: F401 - a fixture
from tests.integration.test_web_chat import Chat, make  # noqa: F401 - a fixture

pytestmark = pytest.mark.slow

NOTE = b"The launch code for project Bluebird is AMBER-7734."
HOSTILE = '<img src=x onerror="alert(1)">@everyone.exe'
TURNS = [
    Turn(
        "Thought: The note may say.\nAction: lookup[launch code for project Bluebird]",
        chunk_size=4,
        delay=0.05,
    ),
    Turn("Thought: It does.\nFinal Answer: The code is AMBER-7734."),
]


async def test_a_person_attaches_files_in_headless_chromium(
    chromium: str,  # noqa: F811 - the fixture
    make: Any,  # noqa: F811 - the fixture
) -> None:
    from playwright.async_api import async_playwright

    manual = LookupTool(manual=Path(bot.__file__).parent / "knowledge")
    c: Chat = await make(TURNS, files=FileLimits(), lookup=manual)
    requests: list[str] = []
    problems: list[str] = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=chromium, headless=True, args=["--no-sandbox"]
        )
        try:
            context = await browser.new_context(viewport={"width": 1280, "height": 900})
            context.on("request", lambda r: requests.append(r.url))
            page = await context.new_page()
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}"))
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            await page.goto(c.url + "/", wait_until="load")
            box = page.get_by_label("Your question")
            await box.wait_for()

            # Picked with the button's file input; another dropped on the page; one removed.
            await page.set_input_files(
                "#files", files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": NOTE}]
            )
            await drop(page, "extra.txt", "not needed")
            await drop(page, HOSTILE, "MZ")
            chips = page.locator("#attached li")
            assert await chips.count() == 3
            assert HOSTILE in await chips.nth(2).inner_text(), "a name is shown as text"
            assert await page.locator("#attached img").count() == 0
            await page.get_by_role("button", name="Remove extra.txt").click()
            assert await chips.count() == 2

            await box.fill("What is the launch code for project Bluebird?")
            await box.press("Enter")
            turn = page.locator("li.turn").last
            await turn.locator(".footer").wait_for(timeout=20_000)
            assert "AMBER-7734" in await turn.locator(".answer").inner_text()
            assert await chips.count() == 0 and await page.locator("#attached").is_hidden()
            note = page.locator("li.note")
            await note.wait_for()
            assert "this kind of file is not accepted here" in await note.inner_text()
            assert await page.locator("img").count() == 0
            (trace,) = await c.chat.stores.traces.list(c.chat.sessions.all()[-1].conversation)
            assert trace.steps[0].sources[0] == "notes.txt"
        finally:
            await browser.close()
    strangers = [u for u in requests if not u.startswith(c.url + "/")]
    assert strangers == [], f"requests left the page's origin: {strangers}"
    assert problems == []


async def drop(page: Any, name: str, text: str) -> None:
    """A file dragged from the desktop and dropped on the page, as the browser delivers it."""
    transfer = await page.evaluate_handle(
        """([name, text]) => {
            const data = new DataTransfer();
            data.items.add(new File([text], name, { type: "application/octet-stream" }));
            return data;
        }""",
        [name, text],
    )
    await page.dispatch_event("body", "dragover", {"dataTransfer": transfer})
    await page.dispatch_event("body", "drop", {"dataTransfer": transfer})
