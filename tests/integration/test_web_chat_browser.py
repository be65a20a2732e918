"""The web chat in a real browser: Debian's headless Chromium driven by Playwright, against
the chat served over real HTTP (as ``reactbot serve --platform web`` serves it).

A person asks with the keyboard (Enter), watches two steps arrive before the answer, stops
a slow run (the Stop button, and Escape), approves one action and denies another with a
reason, opens the trace page, reloads and finds the conversation. No console error, no
request leaves the page's origin. Screenshots at 360 and 1280 px, light and dark, go to
``$REACTBOT_ARTIFACTS/web-chat/`` (default ``artifacts/``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from core.scripted import Turn
from tests.integration.test_trace_page_browser import ROOT, chromium  # noqa: F401 - a fixture
from tests.integration.test_web_chat import Chat, make  # noqa: F401 - a fixture

pytestmark = pytest.mark.slow

SLOW = {"chunk_size": 6, "delay": 0.04}
TURNS = [
    # 1: two tool steps, then the answer, slowly enough to watch
    Turn("Thought: First the product.\nAction: calculate[17*23]", **SLOW),  # type: ignore[arg-type]
    Turn("Thought: Now add four.\nAction: calculate[391+4]", **SLOW),  # type: ignore[arg-type]
    Turn("Thought: Done.\nFinal Answer: 17*23+4 = **395**", chunk_size=3, delay=0.1),
    # 2: a run that stalls, stopped with the button
    Turn("Thought: this will take a very long time", chunk_size=4, stall_after=3),
    # 3: stopped with Escape
    Turn("Thought: another long one", chunk_size=4, stall_after=3),
    # 4: an action a person approves
    Turn("Thought: I will delete it.\nAction: files_delete[old.txt]"),
    Turn("Thought: done.\nFinal Answer: old.txt is deleted."),
    # 5: one a person denies, with a reason
    Turn("Thought: I will delete it.\nAction: files_delete[report.txt]"),
    Turn(
        "Thought: I was not allowed.\nFinal Answer: I kept report.txt, as you asked.\n"
        "## What is left\n| file | size |\n|---|---|\n| report.txt | 2 KB |\n"
        "See [Verify your account](https://evil.example/login) and <script>alert(1)</script>"
    ),
]


@pytest.fixture
def artifacts() -> Path:
    folder = Path(os.environ.get("REACTBOT_ARTIFACTS", ROOT / "artifacts")) / "web-chat"
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nweb chat screenshots: {folder}", file=sys.stderr)
    return folder


STOP_LINES = """() => {
    const bar = document.createElement("div");
    bar.className = "live";
    const status = bar.appendChild(document.createElement("span"));
    status.className = "status";
    status.textContent = "⏳ Thinking about a long question · step 3 of 8 · 12.3 s ".repeat(3);
    const stop = bar.appendChild(document.createElement("button"));
    stop.className = "stop";
    stop.textContent = "Stop";
    document.querySelector(".message").appendChild(bar);
    const lines = stop.getBoundingClientRect().height / parseFloat(getComputedStyle(stop).lineHeight);
    bar.remove();
    return lines;
}"""


async def test_a_person_uses_the_chat_in_headless_chromium(
    chromium: str,  # noqa: F811 - the fixture
    artifacts: Path,
    make: Any,  # noqa: F811 - the fixture
) -> None:
    from playwright.async_api import async_playwright

    c: Chat = await make(TURNS, approval=True)
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
            response = await page.goto(c.url + "/", wait_until="load")
            assert response is not None and response.status == 200
            box = page.get_by_label("Your question")
            await box.wait_for()
            assert await page.evaluate("document.activeElement.id") == "question"

            # 1. Asked with Enter; two steps show while the run is still live.
            before = await page.locator("li.turn").count()
            await box.fill("what is 17*23+4?")
            await box.press("Enter")
            turn = await new_turn(page, before)
            # Seen in one frame: the second step's action, the run still live, no answer yet.
            await page.wait_for_function(
                """() => {
                    const turn = [...document.querySelectorAll("li.turn")].pop();
                    return turn && turn.querySelectorAll(".step .action").length >= 2
                        && turn.querySelector(".live .stop") && !turn.querySelector(".footer");
                }"""
            )
            await turn.locator(".footer").wait_for()
            assert await turn.locator(".answer strong").inner_text() == "395"
            assert await turn.locator(".step .observation").count() == 2
            assert await turn.locator(".stop").count() == 0
            await page.screenshot(path=artifacts / "answered-1280.png", full_page=True)

            # 2. Stop, with the button.
            before = await page.locator("li.turn").count()
            await box.fill("a slow one")
            await page.get_by_role("button", name="Send").click()
            turn = await new_turn(page, before)
            await turn.locator(".step .thought").wait_for()
            await turn.get_by_role("button", name="Stop").click()
            await turn.locator(".outcome", has_text="Stopped by you").wait_for()

            # 3. Stop, with Escape.
            before = await page.locator("li.turn").count()
            await box.fill("another slow one")
            await box.press("Enter")
            turn = await new_turn(page, before)
            await turn.locator(".step .thought").wait_for()
            await page.keyboard.press("Escape")
            await turn.locator(".outcome", has_text="Stopped by you").wait_for()

            # 4. Approve.
            before = await page.locator("li.turn").count()
            await box.fill("delete old.txt")
            await box.press("Enter")
            turn = await new_turn(page, before)
            await turn.locator(".pending").wait_for()
            await page.screenshot(path=artifacts / "approval-1280.png", full_page=True)
            await turn.get_by_role("button", name="Approve").click()
            await turn.locator(".footer").wait_for()
            assert c.ran == ["old.txt"]
            assert "approved by you" in await turn.locator(".decided").inner_text()

            # 5. Deny, with a reason.
            before = await page.locator("li.turn").count()
            await box.fill("delete report.txt")
            await box.press("Enter")
            turn = await new_turn(page, before)
            await turn.locator(".pending").wait_for()
            await turn.get_by_role("button", name="Deny").click()
            await turn.get_by_label("Reason for denying").fill("it is the only copy")
            await turn.get_by_role("button", name="Deny now").click()
            await turn.locator(".footer").wait_for()
            assert c.ran == ["old.txt"], "the denied action did not run"
            answer = turn.locator(".answer")
            assert "I kept report.txt" in await answer.inner_text()
            # Markdown drawn as elements; a masked link shows its URL; markup stays text.
            assert await answer.locator("h4").inner_text() == "What is left"
            assert await answer.locator("td").all_inner_texts() == ["report.txt", "2 KB"]
            link = answer.get_by_role("link", name="https://evil.example/login")
            assert await link.get_attribute("rel") == "noopener noreferrer nofollow"
            assert "Verify your account (https://evil.example/login)" in await answer.inner_text()
            assert "<script>alert(1)</script>" in await answer.inner_text()
            assert await page.locator(".answer script").count() == 0

            # The trace page, a click away.
            async with context.expect_page() as opened:
                await (
                    page.locator("li.turn")
                    .first.get_by_role("link", name="the whole trace")
                    .click()
                )
            trace_page = await opened.value
            await trace_page.wait_for_load_state()
            assert "what is 17*23+4?" in await trace_page.content()
            await trace_page.close()

            # A reload shows the conversation.
            await page.reload(wait_until="load")
            await page.locator("li.turn .answer").first.wait_for()
            questions = await page.locator("li.turn .question").all_inner_texts()
            assert questions[0] == "what is 17*23+4?" and "delete report.txt" in questions
            session = await context.cookies()  # the same conversation in the contexts below
            await context.close()

            # Readable at both widths, light and dark.
            for width in (360, 1280):
                for scheme in ("light", "dark"):
                    context = await browser.new_context(
                        viewport={"width": width, "height": 900},
                        color_scheme=scheme,
                    )
                    await context.add_cookies(session)  # type: ignore[arg-type]
                    context.on("request", lambda r: requests.append(r.url))
                    shown = await context.new_page()
                    shown.on("pageerror", lambda e: problems.append(f"page error: {e}"))
                    await shown.goto(c.url + "/", wait_until="load")
                    await shown.locator("li.turn .answer").first.wait_for()
                    # A reload draws the earlier answers' steps, as their live messages did.
                    assert await shown.locator("li.turn .step .observation").count() >= 1
                    assert await shown.evaluate(STOP_LINES) < 2, "Stop wraps in its bar"
                    scroll = await shown.evaluate("document.documentElement.scrollWidth")
                    assert scroll <= width, f"{scroll} px wide at a {width} px viewport"
                    await shown.screenshot(
                        path=artifacts / f"chat-{width}-{scheme}.png", full_page=True
                    )
                    await context.close()
        finally:
            await browser.close()
    strangers = [u for u in requests if not u.startswith(c.url + "/")]
    assert strangers == [], f"requests left the page's origin: {strangers}"
    assert problems == []
    assert (artifacts / "chat-1280-light.png").stat().st_size > 10_000


async def new_turn(page: Any, before: int) -> Any:
    """The turn a question just sent adds: ``.last`` could still be the one before it
    (whose steps then match, several at once) until the page has added the new one."""
    await page.wait_for_function("n => document.querySelectorAll('li.turn').length > n", arg=before)
    return page.locator("li.turn").nth(before)
