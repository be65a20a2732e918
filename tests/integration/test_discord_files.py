"""Files attached to a Discord question, end to end: the real discord.py client against the
fake (attachments served at CDN-like URLs on its own host), the downloader, the extraction,
the conversation's store and the run's ``lookup``."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import discord  # noqa: F401

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from adapters.attachments import ConversationFiles
from adapters.channels import ChannelChoices
from adapters.discord.client import create_bot
from adapters.discord.cog import Services
from adapters.discord.files import discord_downloader
from adapters.discord.settings import DiscordSettings
from adapters.voice import Hearing
from core.agent import Agent
from core.file_workers import FileReaders
from core.files import FileLimits, InMemoryFileStore
from core.history import InMemoryHistoryStore
from core.knowledge import LookupTool
from core.llm import ChatModel
from core.scripted import ScriptedModel, Turn
from core.stores import InMemoryLocks, InMemoryTraceStore
from core.tools import ToolRegistry
from tests.fakes.discord_limits import MISSING_PERMISSIONS
from tests.fakes.discord_server import CHANNEL_ID, ROLE_ID, Call, FakeDiscord
from tests.fakes.local_server import serve_locally
from tests.hostile import pdf_bomb
from tests.integration.test_discord import content_of, tools
from tests.stores import in_memory_stores
from tests.surfaces.policy import policy
from tests.unit.test_files import make_pdf

LIMIT = 50_000
CONVERSATION = f"discord:{CHANNEL_ID}"

LOOKUP_THEN_ANSWER = [
    Turn("Thought: The answer should be in the attached report.\nAction: lookup[warranty months]"),
    Turn("Thought: Page 2 says it.\nAction: finish[The warranty lasts 36 months.]"),
]


@dataclass
class Harness:
    fake: FakeDiscord
    model: ScriptedModel
    traces: InMemoryTraceStore
    store: InMemoryFileStore
    foreign_seen: list[str]
    foreign_base: str
    choices: ChannelChoices


@contextlib.asynccontextmanager
async def running(
    turns: list[Turn | str],
    *,
    catalogue: dict[str, ChatModel] | None = None,
    parse_seconds: float = 5,
    registry: ToolRegistry | None = None,
    hearing: Hearing | None = None,
    free_response_channels: tuple[int, ...] = (),
) -> AsyncIterator[Harness]:
    fake = FakeDiscord()
    fake.add_channel(CHANNEL_ID)
    await fake.start()
    foreign_seen: list[str] = []

    async def foreign(request: web.Request) -> web.Response:
        foreign_seen.append(request.path)
        return web.Response(text="secret from the intranet")

    app = web.Application()
    app.router.add_get("/{tail:.*}", foreign)
    foreign_runner, foreign_port = await serve_locally(app)
    model = ScriptedModel(list(turns))
    traces = InMemoryTraceStore()
    agent = Agent(
        model,
        registry or tools(),
        history=InMemoryHistoryStore(),
        traces=traces,
        locks=InMemoryLocks(),
    )
    store = InMemoryFileStore()
    readers = FileReaders(parse_seconds=parse_seconds)
    files = ConversationFiles(
        store,
        discord_downloader(fake.api_base_url, max_bytes=LIMIT, timeout=5),
        FileLimits(max_bytes=LIMIT),
        reader=readers,
        hearing=hearing or Hearing(),
    )
    settings = DiscordSettings(
        api_base_url=fake.api_base_url,
        edit_interval=0.25,
        tick=0.25,
        guild_ready_timeout=0.05,
        layout="text",  # these tests read the plain content; the cards: test_discord_components
        free_response_channels=free_response_channels,
    )
    services = Services(
        agent,
        in_memory_stores(history=InMemoryHistoryStore(), traces=traces),
        settings,
        policy("discord", cooldown_seconds=0),
        files=files,
    )
    services.choices = ChannelChoices(
        services.stores.channel_settings, catalogue or {}, agent.tools
    )
    bot = create_bot(services)
    task = asyncio.create_task(bot.start("fake-token"))
    try:
        async with asyncio.timeout(10):
            await fake.identified.wait()
            await bot.wait_until_ready()
        yield Harness(
            fake,
            model,
            traces,
            store,
            foreign_seen,
            f"http://127.0.0.1:{foreign_port}",
            services.choices,
        )
    finally:
        await bot.close()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await fake.stop()
        await foreign_runner.cleanup()
        await readers.aclose()


def _is_totals(call: Call) -> bool:
    return call.method == "POST" and content_of(call).startswith("**Totals**")


def _is_reply(call: Call) -> bool:
    return call.method == "POST" and call.path == f"/channels/{CHANNEL_ID}/messages"


async def test_a_question_about_an_attached_pdf_is_answered_from_its_page() -> None:
    async with running(LOOKUP_THEN_ANSWER) as h:
        pdf = make_pdf(["Contents and intro", "The warranty lasts 36 months.", "Index"])
        attachments = [
            h.fake.add_attachment("report.pdf", pdf, content_type="application/pdf"),
            h.fake.add_attachment("big.txt", b"x" * (LIMIT + 1), content_type="text/plain"),
            # declares 10 bytes, holds more than the limit: stopped while reading
            h.fake.add_attachment("lie.txt", b"y" * (LIMIT * 3), declared_size=10),
            h.fake.add_attachment(
                "foreign.txt", b"", url=f"{h.foreign_base}/attachments/1/2/foreign.txt"
            ),
            h.fake.add_attachment("photo.png", b"\x89PNG\r\n", content_type="image/png"),
        ]
        payload = h.fake.message_create("How long is the warranty?", attachments=attachments)
        await h.fake.dispatch("MESSAGE_CREATE", payload)
        await h.fake.wait_for_calls(_is_totals, 1, within=10)

        trace = await h.traces.last(CONVERSATION)
        assert trace is not None and trace.answer == "The warranty lasts 36 months."
        (step, *_) = trace.steps
        assert step.action == "lookup"
        assert step.observation is not None
        assert step.observation.startswith("1. report.pdf, page 2\nThe warranty lasts 36 months.")
        assert "report.pdf, page 2" in step.sources
        # The trace thread shows the passage used, file and page.
        thread_posts = [c for c in h.fake.calls if c.method == "POST" and "/channels/" in c.path]
        assert any("report.pdf, page 2" in content_of(c) for c in thread_posts)

        notice = next(c for c in h.fake.calls if "big.txt" in content_of(c))
        assert content_of(notice).splitlines() == [
            "⚠️ big.txt: larger than 50,000 bytes.",
            "⚠️ lie.txt: larger than 50,000 bytes.",
            "⚠️ foreign.txt: not downloaded, it is not on Discord's file host.",
            "🖼️ Images are ignored: this channel's model reads text only.",
        ]
        assert notice.json["allowed_mentions"]["parse"] == []
        # big.txt was refused on its declared size: never fetched; the foreign host never asked
        assert not any(p.endswith("/big.txt") for p in h.fake.cdn_requests)
        assert any(p.endswith("/lie.txt") for p in h.fake.cdn_requests)
        assert h.foreign_seen == []
        assert [p.file for p in await h.store.load(CONVERSATION)] == ["report.pdf"] * 3


async def test_a_one_file_question_finds_its_file_with_the_shipped_manual_present() -> None:
    """Issue 42: the bot's own lookup (the shipped manual, as a fresh clone has it) and a
    90-character note; the note is the first passage the model reads."""
    import bot

    registry = tools()
    registry.add(LookupTool(manual=Path(bot.__file__).parent / "knowledge"))
    turns = [
        Turn("Thought: The note may say.\nAction: lookup[launch code for project Bluebird]"),
        Turn("Thought: It does.\nAction: finish[AMBER-7734]"),
    ]
    async with running(turns, registry=registry) as h:
        note = b"The launch code for project Bluebird is AMBER-7734."
        attachments = [h.fake.add_attachment("notes.txt", note, content_type="text/plain")]
        payload = h.fake.message_create(
            "What is the launch code for project Bluebird?", attachments=attachments
        )
        await h.fake.dispatch("MESSAGE_CREATE", payload)
        await h.fake.wait_for_calls(_is_totals, 1, within=10)
        trace = await h.traces.last(CONVERSATION)
        assert trace is not None and trace.answer == "AMBER-7734"
        (step, *_) = trace.steps
        assert step.observation is not None
        assert step.observation.startswith(f"1. notes.txt\n{note.decode()}")
        assert step.sources[0] == "notes.txt"


async def test_a_pdf_bomb_is_skipped_in_one_line_and_the_question_still_answered() -> None:
    async with running(LOOKUP_THEN_ANSWER, parse_seconds=1) as h:
        attachments = [
            h.fake.add_attachment("bomb.pdf", pdf_bomb(pages=10)),  # ~20 s of CPU unbounded
            h.fake.add_attachment(
                "terms.pdf", make_pdf(["Intro", "The warranty lasts 36 months."])
            ),
        ]
        payload = h.fake.message_create("How long is the warranty?", attachments=attachments)
        await h.fake.dispatch("MESSAGE_CREATE", payload)
        await h.fake.wait_for_calls(_is_totals, 1, within=20)
        (notice,) = [c for c in h.fake.calls if "bomb.pdf" in content_of(c)]
        assert content_of(notice) == "⚠️ bomb.pdf: took too long to read, skipped."
        trace = await h.traces.last(CONVERSATION)
        assert trace is not None and trace.answer == "The warranty lasts 36 months."
        assert [p.file for p in await h.store.load(CONVERSATION)] == ["terms.pdf"] * 2


async def test_stop_while_a_pdf_bomb_is_read_ends_the_reading_at_once() -> None:
    async with running([], parse_seconds=60) as h:
        attachments = [h.fake.add_attachment("bomb.pdf", pdf_bomb(pages=50))]  # minutes of CPU
        payload = h.fake.message_create("What does it say?", attachments=attachments)
        await h.fake.dispatch("MESSAGE_CREATE", payload)
        # The live message, with Stop, is there while the file is read.
        live = await h.fake.wait_for_call(lambda c: _is_reply(c) and "reactbot:stop" in str(c.json))
        async with asyncio.timeout(10):
            while not (workers := file_workers()):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        message_id = int(h.fake.created[-1])
        stop = next(
            b["custom_id"]
            for row in live.json["components"]
            for b in row.get("components", [])
            if str(b.get("custom_id", "")).startswith("reactbot:stop")
        )
        pressed = asyncio.get_running_loop().time()
        await h.fake.dispatch("INTERACTION_CREATE", h.fake.button_press(message_id, stop))
        final = await h.fake.wait_for_call(
            lambda c: (  # the final edit (a live one, "Reading the attached files", keeps Stop)
                c.method == "PATCH"
                and c.path.endswith(f"/messages/{message_id}")
                and "Stopped" in content_of(c)
            ),
            within=5,
        )
        async with asyncio.timeout(2):  # its worker was killed, not left to finish
            while alive(workers):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        assert asyncio.get_running_loop().time() - pressed < 3
        print(f"\nfinal after Stop: {content_of(final)!r}")
        assert "Stopped" in content_of(final)
        assert h.model.calls == []  # the question never reached the model


def alive(pids: list[int]) -> bool:
    return any(Path(f"/proc/{pid}").exists() for pid in pids)


def file_workers() -> list[int]:
    """This process's file workers (``python -m core.file_workers``), from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat, cmdline = (entry / "stat").read_text(), (entry / "cmdline").read_bytes()
        except (OSError, NotADirectoryError):
            continue
        if (
            int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid()
            and b"core.file_workers" in cmdline
        ):
            found.append(int(entry.name))
    return found


async def test_files_stay_with_the_conversation_until_reset() -> None:
    later = [
        Turn("Thought: Check the report.\nAction: lookup[warranty]"),
        Turn("Thought: Done.\nAction: finish[36 months.]"),
    ]
    async with running(LOOKUP_THEN_ANSWER + later) as h:
        pdf = make_pdf(["Intro", "The warranty lasts 36 months."])
        first = h.fake.message_create(
            "Warranty?", attachments=[h.fake.add_attachment("report.pdf", pdf)]
        )
        await h.fake.dispatch("MESSAGE_CREATE", first)
        await h.fake.wait_for_calls(_is_totals, 1, within=10)
        # The live message, with Stop, is posted before the files are read (a Stop ends
        # the reading); Discord shows "is typing…" while they are.
        calls = h.fake.calls
        typing = next(i for i, c in enumerate(calls) if c.path.endswith("/typing"))
        reply = next(i for i, c in enumerate(calls) if _is_reply(c))
        assert reply < typing and h.fake.typing == [CHANNEL_ID]
        assert "reactbot:stop" in str(calls[reply].json)
        # A later question without attachments still searches the conversation's files.
        await h.fake.dispatch("MESSAGE_CREATE", h.fake.message_create("And again?"))
        await h.fake.wait_for_calls(_is_totals, 2, within=10)
        assert h.fake.typing == [CHANNEL_ID]  # no files this time: its reply came at once
        trace = await h.traces.last(CONVERSATION)
        assert trace is not None and trace.steps[0].observation is not None
        assert "report.pdf, page 2" in trace.steps[0].observation

        reset = h.fake.interaction_create("reset", roles=(ROLE_ID,))  # an admin: shared
        h.fake.remember_interaction(reset)
        await h.fake.dispatch("INTERACTION_CREATE", reset)
        await h.fake.wait_for_call(lambda c: "forgot" in content_of(c))
        assert await h.store.load(CONVERSATION) == []


async def test_slash_ask_takes_an_optional_file() -> None:
    async with running(LOOKUP_THEN_ANSWER) as h:
        pdf = make_pdf(["Intro", "The warranty lasts 36 months."])
        attachment = h.fake.add_attachment("report.pdf", pdf, content_type="application/pdf")
        payload = h.fake.interaction_create(
            "ask", {"question": "How long is the warranty?"}, attachments={"file": attachment}
        )
        h.fake.remember_interaction(payload)
        await h.fake.dispatch("INTERACTION_CREATE", payload)
        await h.fake.wait_for_calls(_is_totals, 1, within=10)
        trace = await h.traces.last(CONVERSATION)
        assert trace is not None and trace.answer == "The warranty lasts 36 months."
        assert (trace.steps[0].observation or "").startswith("1. report.pdf, page 2\n")
        assert [c for c in h.fake.cdn_requests if c.endswith("/report.pdf")]


async def test_slash_ask_says_in_a_follow_up_which_file_was_refused() -> None:
    answer: list[Turn | str] = ["Thought: No file to read.\nAction: finish[Sorry, no file.]"]
    async with running(answer) as h:
        attachment = h.fake.add_attachment("huge.txt", b"z" * (LIMIT + 1))
        payload = h.fake.interaction_create(
            "ask", {"question": "Summarise this"}, attachments={"file": attachment}
        )
        h.fake.remember_interaction(payload)
        await h.fake.dispatch("INTERACTION_CREATE", payload)
        await h.fake.wait_for_calls(_is_totals, 1, within=10)
        (notice,) = [c for c in h.fake.calls if "huge.txt" in content_of(c)]
        assert content_of(notice) == "⚠️ huge.txt: larger than 50,000 bytes."
        assert notice.method == "POST" and "/webhooks/" in notice.path  # the follow-up
        assert notice.status == 200
        trace = await h.traces.last(CONVERSATION)
        assert trace is not None and trace.answer == "Sorry, no file."


async def test_a_channel_on_another_model_with_a_persona_answers_from_an_attached_pdf() -> None:
    # issue 16's "done when": the channel's catalogue model and persona, /ask with a PDF
    # attached, a lookup into that PDF, and a trace that shows model, persona and passage
    big = ScriptedModel(list(LOOKUP_THEN_ANSWER), model_name="big-model-v2")
    async with running([], catalogue={"big": big}) as h:
        pdf = make_pdf(["Contents", "The warranty lasts 36 months.", "Index"])
        attachment = h.fake.add_attachment("report.pdf", pdf, content_type="application/pdf")
        channel_key = f"discord:{CHANNEL_ID}"
        await h.choices.set_model(channel_key, "big")
        await h.choices.set_persona(channel_key, "Answer like a patient support engineer.")
        payload = h.fake.interaction_create(
            "ask", {"question": "How long is the warranty?"}, attachments={"file": attachment}
        )
        h.fake.remember_interaction(payload)
        await h.fake.dispatch("INTERACTION_CREATE", payload)
        await h.fake.wait_for_calls(_is_totals, 1, within=10)
        trace = await h.traces.last(CONVERSATION)
        assert trace is not None and trace.answer == "The warranty lasts 36 months."
        assert trace.models == ["big-model-v2"] and h.model.calls == []
        assert trace.persona == "Answer like a patient support engineer."
        assert (trace.steps[0].observation or "").startswith("1. report.pdf, page 2")
        system = big.calls[0].messages[0]["content"]
        assert system.endswith("Answer like a patient support engineer.\nchannel persona>>>")
        markdown = trace.to_markdown()
        assert "**Channel persona:**" in markdown and "report.pdf, page 2" in markdown


async def test_files_are_read_and_answered_when_typing_is_refused() -> None:
    async with running(LOOKUP_THEN_ANSWER) as h:
        h.fake.refuse_next("POST", "/typing", MISSING_PERMISSIONS, count=None)
        pdf = make_pdf(["Intro", "The warranty lasts 36 months."])
        payload = h.fake.message_create(
            "Warranty?", attachments=[h.fake.add_attachment("report.pdf", pdf)]
        )
        await h.fake.dispatch("MESSAGE_CREATE", payload)
        await h.fake.wait_for_calls(_is_totals, 1, within=10)
        refused = [c for c in h.fake.calls if c.path.endswith("/typing")]
        assert [c.status for c in refused] == [403]
        trace = await h.traces.last(CONVERSATION)
        assert trace is not None and trace.answer == "The warranty lasts 36 months."
