"""The trace page in a real browser: Debian's headless Chromium driven by Playwright.

``scripts/ensure-chromium`` installs ``chromium`` and ``chromium-driver`` with apt-get when
they are missing (as ``scripts/with-redis`` does for Redis); where that cannot be done the
test is skipped, saying so loudly. Screenshots go to ``$REACTBOT_ARTIFACTS`` (default
``artifacts/``) under ``trace-page/``; the test prints the folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bot.web import LinkSigner, add_trace_pages
from core.stores import InMemoryTraceStore
from core.trace import ApprovalRecord, Trace, TraceStep

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BIG = 50 * 1024
WIDTHS = (360, 1280)


@pytest.fixture(scope="module")
def chromium() -> str:
    done = subprocess.run(
        [str(ROOT / "scripts" / "ensure-chromium")], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        message = (
            "\n" + "!" * 78 + "\nSKIPPING THE BROWSER TEST: Chromium is not installed and could "
            f"not be installed here.\n{done.stderr.strip()}\n" + "!" * 78
        )
        print(message, file=sys.stderr)
        pytest.skip(message)
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture
def artifacts() -> Path:
    folder = Path(os.environ.get("REACTBOT_ARTIFACTS", ROOT / "artifacts")) / "trace-page"
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\ntrace page screenshots: {folder}", file=sys.stderr)
    return folder


def twelve_step_trace() -> Trace:
    """A realistic run: searches, a calculation, an approval, one 50 KB observation."""
    trace = Trace(
        question="What is the population of Tokyo divided by the area of France?",
        user="ada",
        conversation="discord #general",
        models=["gpt-4o-mini"],
        mode="text",
    )
    t0 = 1_800_000_000.0
    trace.started_at = t0
    big = "".join(
        f"{n:05d} Tokyo Metropolis population by ward, 2024 estimate <row>&amp; {n * 37 % 9973}\n"
        for n in range(BIG // 60 + 1)
    )[:BIG]
    plan = [
        ("search", "Tokyo population 2024", "1. Tokyo — Wikipedia: 37.1 million (greater area)"),
        ("read", "https://www.stat.go.jp/english/data/", big),
        ("search", "area of France km2", "1. France — Wikipedia: 551,695 km² (metropolitan)"),
        ("search", "France area including overseas", "643,801 km² including overseas regions"),
        ("lookup", "metropolitan France", "Metropolitan France: 551,695 km²"),
        ("calculate", "37100000 / 551695", "67.247..."),
        ("search", "Tokyo metropolitan area definition", "Greater Tokyo Area: 37.1 million"),
        ("calculate", "14000000 / 551695", "25.376..."),
        ("search", "Tokyo prefecture population", "Tokyo Metropolis: 14.0 million (2024)"),
        ("files_write", '{"path": "notes/tokyo.md"}', "written"),
        ("calculate", "round(37100000 / 551695, 1)", "67.2"),
        (None, None, None),
    ]
    for index, (action, argument, observation) in enumerate(plan, 1):
        start = t0 + index * 0.9
        step = TraceStep(
            index=index,
            kind="final" if action is None else "step",
            thought=(
                f"Step {index}: I need {'the answer' if action is None else action} "
                "to get closer <to> the result."
            ),
            action=action,
            action_input=argument,
            observation=observation,
            started_at=start,
            ended_at=start + 0.2 + (index % 4) * 0.4,
            model="gpt-4o-mini",
            prompt_tokens=300 + 40 * index,
            completion_tokens=30 + index,
            sources=["https://en.wikipedia.org/wiki/Tokyo", "javascript:alert(1)"]
            if action == "search"
            else [],
        )
        if action == "files_write":
            step.approval = ApprovalRecord("approved", "ada", at=start)
        trace.steps.append(step)
    trace.ended_at = t0 + 12.5
    trace.answer = "About 67 people per km² of metropolitan France (37.1 M / 551,695 km²)."
    trace.status = "answered"
    trace.cited = ["https://en.wikipedia.org/wiki/Tokyo", "https://en.wikipedia.org/wiki/France"]
    return trace


@pytest.fixture
async def site() -> AsyncIterator[tuple[LinkSigner, Trace, Trace]]:
    """The pages served for a 12-step trace and a replay that parts from it at step 6."""
    traces = InMemoryTraceStore()
    trace, replay = twelve_step_trace(), twelve_step_trace()
    replay.steps[5].observation = "67.25"
    await traces.save(trace)
    await traces.save(replay)
    signer = LinkSigner("browser-test-secret-0123456789abcdef", public_url=None)
    app = web.Application()
    add_trace_pages(app, traces=traces, signer=signer)
    async with TestServer(app, host="127.0.0.1") as server:
        signer.public_url = str(server.make_url("")).rstrip("/")
        yield signer, trace, replay


@pytest.fixture
def page_url(site: tuple[LinkSigner, Trace, Trace]) -> str:
    signer, trace, _ = site
    link = signer.link(trace.id)
    assert link is not None
    return link


async def test_the_page_in_headless_chromium(chromium: str, artifacts: Path, page_url: str) -> None:
    from playwright.async_api import async_playwright

    origin = "{0.scheme}://{0.netloc}".format(urlsplit(page_url))
    requests: list[str] = []
    problems: list[str] = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=chromium, headless=True, args=["--no-sandbox"]
        )
        try:
            for width in WIDTHS:
                for scheme in ("light", "dark"):
                    context = await browser.new_context(
                        viewport={"width": width, "height": 900}, color_scheme=scheme
                    )
                    page = await context.new_page()
                    page.on("request", lambda r: requests.append(r.url))
                    page.on(
                        "console",
                        lambda m: (
                            problems.append(f"console {m.type}: {m.text}")
                            if m.type in ("error", "warning")
                            else None
                        ),
                    )
                    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
                    response = await page.goto(page_url, wait_until="load")
                    assert response is not None and response.status == 200
                    assert problems == []  # a refused style would show here first
                    # Readable at this width: nothing runs off the side.
                    scroll = await page.evaluate("document.documentElement.scrollWidth")
                    assert scroll <= width, f"{scroll} px wide at a {width} px viewport"
                    assert await page.locator("li.step").count() == 12
                    await page.screenshot(
                        path=artifacts / f"page-{width}-{scheme}.png", full_page=True
                    )
                    if scheme == "light":
                        await page.screenshot(path=artifacts / f"page-{width}-top.png")
                    # Expand the 50 KB observation; its whole text shows.
                    summary = page.locator("summary", has_text="51,200 characters")
                    assert await summary.count() == 1
                    full = summary.locator("xpath=..").locator("pre")
                    assert not await full.is_visible()
                    await summary.click()
                    await full.wait_for(state="visible")
                    shown = await full.inner_text()
                    assert len(shown) >= BIG - 100 and "<row>&amp;" in shown
                    await full.scroll_into_view_if_needed()
                    await page.screenshot(path=artifacts / f"page-{width}-{scheme}-expanded.png")
                    scroll = await page.evaluate("document.documentElement.scrollWidth")
                    assert scroll <= width
                    await context.close()
        finally:
            await browser.close()
    assert requests, "the browser made no request at all"
    strangers = [u for u in requests if not u.startswith(origin + "/")]
    assert strangers == [], f"requests left the page's origin: {strangers}"
    assert problems == []
    for width in WIDTHS:
        assert (artifacts / f"page-{width}-light.png").stat().st_size > 10_000


async def test_the_comparison_in_headless_chromium(
    chromium: str, artifacts: Path, site: tuple[LinkSigner, Trace, Trace]
) -> None:
    from playwright.async_api import async_playwright

    signer, trace, replay = site
    link = signer.compare_link(trace.id, replay.id)
    assert link is not None
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(link))
    requests: list[str] = []
    problems: list[str] = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=chromium, headless=True, args=["--no-sandbox"]
        )
        try:
            for width in WIDTHS:
                context = await browser.new_context(viewport={"width": width, "height": 900})
                page = await context.new_page()
                page.on("request", lambda r: requests.append(r.url))
                page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}"))
                page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
                response = await page.goto(link, wait_until="load")
                assert response is not None and response.status == 200
                assert await page.locator("li.step.parts").count() == 2
                assert await page.evaluate("document.documentElement.scrollWidth") <= width
                await page.click("text=marked")  # the in-page link to the first difference
                assert await page.locator("#parts").is_visible()
                await page.screenshot(path=artifacts / f"compare-{width}.png")
                await context.close()
        finally:
            await browser.close()
    assert [u for u in requests if not u.startswith(origin + "/")] == []
    assert problems == []
