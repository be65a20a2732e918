"""Files attached to a Slack question, end to end: the real bolt app and slack_sdk client
against the fake Slack, which serves ``url_private`` to the bot token only."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

import bot as shipped
from adapters.attachments import ConversationFiles
from adapters.channels import ChannelChoices
from adapters.slack.bot import SlackBot
from adapters.slack.files import slack_downloader
from adapters.slack.server import HttpServer
from adapters.slack.settings import SlackSettings
from adapters.slack.settings_commands import settings_key
from adapters.voice import Hearing
from core.agent import Agent, AgentSettings
from core.file_workers import FileReaders
from core.files import FileLimits, InMemoryFileStore
from core.history import InMemoryHistoryStore
from core.knowledge import LookupTool
from core.llm import ChatModel
from core.openai_model import OpenAIChatModel
from core.scripted import ScriptedModel, Turn
from core.stores import (
    InMemoryChannelSettings,
    InMemoryLocks,
    InMemoryTraceStore,
)
from core.tools import FunctionTool, ToolRegistry
from tests.fakes.local_server import serve_locally
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import BOT_USER_ID, FakeSlack, message_text
from tests.integration.test_slack_app import ASKER, CHANNEL, SECRET, Harness, calculate
from tests.integration.test_vision import PNG
from tests.stores import in_memory_stores
from tests.surfaces.policy import policy
from tests.unit.test_files import make_pdf

LIMIT = 50_000

LOOKUP_THEN_ANSWER: list[Turn | str] = [
    Turn("Thought: The report should say.\nAction: lookup[warranty months]"),
    Turn("Thought: Page 3 says it.\nAction: finish[The warranty lasts 36 months.]"),
]


def tools() -> ToolRegistry:
    registry = ToolRegistry()
    registry.add(FunctionTool("calculate", calculate, description="math", example="calculate[1]"))
    return registry


@pytest.fixture
async def foreign() -> AsyncIterator[tuple[str, list[str]]]:
    seen: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.Response(text="intranet secret")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner, port = await serve_locally(app)
    yield f"http://127.0.0.1:{port}", seen
    await runner.cleanup()


@pytest.fixture
async def served(readers: FileReaders) -> AsyncIterator[Callable[..., Any]]:
    opened: list[tuple[HttpServer, SlackBot, aiohttp.ClientSession, FakeSlack]] = []

    async def build(
        turns: list[Turn | str],
        *,
        download_token: str = "xoxb-test",
        catalogue: dict[str, ChatModel] | None = None,
        hearing: Hearing | None = None,
        registry: ToolRegistry | None = None,
        manual: bool = False,
    ) -> tuple[Harness, InMemoryTraceStore, InMemoryFileStore]:
        fake = FakeSlack()
        await fake.__aenter__()
        model = ScriptedModel(turns)
        traces = InMemoryTraceStore()
        registry = registry or tools()
        if manual:  # the bot's own lookup over the shipped manual, as a fresh clone has it
            registry.add(LookupTool(manual=Path(shipped.__file__).parent / "knowledge"))
        agent = Agent(
            model,
            registry,
            history=InMemoryHistoryStore(),
            traces=traces,
            locks=InMemoryLocks(),
            settings=AgentSettings(model_timeout=5.0, deadline=20.0),
        )
        settings = SlackSettings(
            bot_token="xoxb-test",
            signing_secret=SECRET,
            mode="http",
            host="127.0.0.1",
            port=0,
            api_base_url=fake.base_url,
            update_interval=0.25,
            workspace_updates_per_minute=0,
            shutdown_grace=3.0,
        )
        store = InMemoryFileStore()
        files = ConversationFiles(
            store,
            slack_downloader(fake.base_url, download_token, max_bytes=LIMIT, timeout=5),
            FileLimits(max_bytes=LIMIT),
            reader=readers,
            hearing=hearing or Hearing(),
        )
        channel_settings = InMemoryChannelSettings()
        choices = ChannelChoices(channel_settings, catalogue or {}, agent.tools)
        bot = SlackBot(
            agent,
            stores=in_memory_stores(channel_settings=channel_settings),
            settings=settings,
            policy=policy("slack", cooldown_seconds=0.0),
            files=files,
            choices=choices,
        )
        await bot.start()
        server = HttpServer(bot, host="127.0.0.1", port=0, path=settings.path)
        port = await server.start()
        session = aiohttp.ClientSession()
        opened.append((server, bot, session, fake))
        url = f"http://127.0.0.1:{port}/slack/events"
        return Harness(fake, bot, model, url, session), traces, store

    yield build
    for server, bot, session, fake in opened:
        await server.stop()
        await bot.aclose()
        await session.close()
        await fake.__aexit__(None, None, None)


def mention(text: str, files: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "app_mention",
        "channel": CHANNEL,
        "user": ASKER,
        "ts": "1800000000.000100",
        "text": f"<@{BOT_USER_ID}> {text}",
        "files": files,
    }


async def test_a_mention_with_a_pdf_is_answered_from_its_page(
    served: Callable[..., Any], foreign: tuple[str, list[str]]
) -> None:
    h, traces, store = await served(LOOKUP_THEN_ANSWER)
    foreign_base, foreign_seen = foreign
    pdf = make_pdf(["Contents", "Delivery terms", "The warranty lasts 36 months.", "Index"])
    files = [
        h.fake.add_file("report.pdf", pdf, mimetype="application/pdf"),
        h.fake.add_file("big.csv", b"a,b\n" * (LIMIT // 4 + 1), mimetype="text/csv"),
        h.fake.add_file("lie.md", b"# x\n" * LIMIT, declared_size=12, mimetype="text/markdown"),
        h.fake.add_file("elsewhere.txt", b"", url=f"{foreign_base}/files-pri/T-F/elsewhere.txt"),
    ]
    status, _, _ = await h.event(mention("How long is the warranty?", files), event_id="EvF1")
    assert status == 200
    await h.settled()

    trace = await traces.last(f"slack:T0TEAM:{CHANNEL}:{h.root().ts}")
    assert trace is not None
    assert trace.answer == "The warranty lasts 36 months."
    observation = trace.steps[0].observation or ""
    assert observation.startswith("1. report.pdf, page 3\nThe warranty lasts 36 months.")
    # The trace in the thread shows the passage and its page.
    texts = [message_text(m) for m in h.fake.messages.values()]
    assert any("report.pdf, page 3" in t for t in texts)
    (notice,) = [t for t in texts if "big.csv" in t]
    assert notice.splitlines() == [
        "⚠️ big.csv: larger than 50,000 bytes.",
        "⚠️ lie.md: larger than 50,000 bytes.",
        "⚠️ elsewhere.txt: not downloaded, it is not on Slack's file host.",
    ]
    assert foreign_seen == []
    # The token went with every request for a hosted file; big.csv was never asked for.
    assert h.fake.file_requests and all(a == "Bearer xoxb-test" for _, a in h.fake.file_requests)
    assert not any("big.csv" in p for p, _ in h.fake.file_requests)
    assert {p.file for p in await store.load(trace.conversation)} == {"report.pdf"}


async def test_a_one_file_question_finds_its_file_with_the_shipped_manual_present(
    served: Callable[..., Any],
) -> None:
    """Issue 42 on Slack: a 90-character note beside the 57-passage manual; the note is
    the first passage the model reads."""
    turns: list[Turn | str] = [
        Turn("Thought: The note may say.\nAction: lookup[launch code for project Bluebird]"),
        Turn("Thought: It does.\nFinal Answer: AMBER-7734"),
    ]
    h, traces, _ = await served(turns, manual=True)
    note = b"The launch code for project Bluebird is AMBER-7734."
    files = [h.fake.add_file("notes.txt", note, mimetype="text/plain")]
    question = mention("What is the launch code for project Bluebird?", files)
    status, _, _ = await h.event(question, event_id="EvNote")
    assert status == 200
    await h.settled()
    trace = await traces.last(f"slack:T0TEAM:{CHANNEL}:{h.root().ts}")
    assert trace is not None and trace.answer == "AMBER-7734"
    (step, *_) = trace.steps
    assert (step.observation or "").startswith(f"1. notes.txt\n{note.decode()}")
    assert step.sources[0] == "notes.txt"


async def test_without_a_valid_token_slack_redirects_and_the_file_is_refused(
    served: Callable[..., Any],
) -> None:
    answer: list[Turn | str] = ["Thought: nothing to read.\nAction: finish[No file.]"]
    h, _, store = await served(answer, download_token="xoxb-revoked")
    files = [h.fake.add_file("notes.txt", b"secret notes")]
    await h.event(mention("Read this", files), event_id="EvF2")
    await h.settled()
    texts = [message_text(m) for m in h.fake.messages.values()]
    assert any(
        "notes.txt: Slack did not hand over the file (it redirected elsewhere" in t for t in texts
    )
    assert any("No file." in t for t in texts)  # the question itself was still answered
    assert [a for _, a in h.fake.file_requests] == ["Bearer xoxb-revoked"]  # no hop followed
    assert await store.load(f"slack:T0TEAM:{CHANNEL}:{h.root().ts}") == []


@pytest.mark.parametrize("vision", [True, False])
async def test_a_slack_channel_on_a_vision_model_shows_it_the_attached_image(
    served: Callable[..., Any], vision: bool
) -> None:
    """The image goes with the question as an image part, through the real openai client to
    a fake that refuses image parts for a text-only model (as OpenAI does); a text-only
    model's channel is told once that images are ignored, and the question is answered."""
    async with FakeOpenAI(model="eyes", vision=vision) as openai:
        openai.reply("Thought: Looked.\nAction: finish[It is a PNG.]")
        model = OpenAIChatModel(model="eyes", base_url=openai.base_url, api_key="sk-test")
        try:
            h, traces, _ = await served([], catalogue={"eyes": model})
            h.bot.choices.vision = frozenset({"eyes"}) if vision else frozenset()
            await h.bot.choices.set_model(settings_key("T0TEAM", CHANNEL), "eyes")
            photo = h.fake.add_file("photo.png", PNG, mimetype="image/png")
            status, _, _ = await h.event(mention("What is in it?", [photo]), event_id="EvV1")
            assert status == 200
            await h.settled()
        finally:
            await model.aclose()
    trace = await traces.last(f"slack:T0TEAM:{CHANNEL}:{h.root().ts}")
    assert trace is not None and trace.answer == "It is a PNG."
    content = openai.requests[0]["messages"][-1]["content"]
    said = [t for t in (message_text(m) for m in h.fake.messages.values()) if "Images" in t]
    if vision:
        expected = f"data:image/png;base64,{base64.b64encode(PNG).decode()}"
        assert content[1]["image_url"]["url"] == expected and said == []
    else:
        assert isinstance(content, str) and len(said) == 1
        assert said[0] == "🖼️ Images are ignored: this channel's model reads text only."
