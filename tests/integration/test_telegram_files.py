"""Documents and photos on a Telegram question, end to end: the real python-telegram-bot
client against the strict fake's getFile and file host, the shared downloader, the file
workers, the conversation's store and the run's ``lookup``; "typing…" while they are read.
The fake refuses what Telegram refuses (an unknown ``file_id``, a file over 20 MB)."""

from __future__ import annotations

import asyncio
import base64
from dataclasses import replace
from pathlib import Path
from typing import Any

from telegram import Bot

import bot as shipped
from adapters.telegram.files import typing
from core.files import MB, FileLimits
from core.knowledge import LookupTool
from core.scripted import Turn
from tests.fakes.telegram_server import FakeTelegram
from tests.integration import test_telegram_bot
from tests.integration.test_telegram_bot import CHAT, GROUP, Harness, ended

make = test_telegram_bot.make
"""The Telegram harness fixture (the real client, the bot, the strict fake)."""

REPORT = b"Warranty terms.\nThe warranty lasts 36 months from the date of delivery.\n"
LOOKUP = [
    Turn("Thought: The attached report should say.\nAction: lookup[warranty months]"),
    Turn("Thought: It says so.\nFinal Answer: The warranty lasts 36 months."),
]
JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8 + b"\xff\xd9"


def _notes(h: Harness, chat: int = CHAT) -> list[str]:
    return [m.text for m in h.fake.bot_messages(chat)]


async def test_a_document_on_a_question_is_read_and_looked_up(make: Any) -> None:
    h: Harness = await make(LOOKUP, files=FileLimits(max_bytes=MB))
    question = h.fake.user_sends(
        CHAT, caption="How long is the warranty?", document=("report.txt", REPORT, "text/plain")
    )
    final = await h.answer_to(question)
    assert "36 months" in final.text
    trace = (await h.stores.traces.list(f"telegram:{CHAT}"))[0]
    assert trace.question == "How long is the warranty?"
    assert "36 months" in (trace.steps[0].observation or "")  # lookup found the file's text
    (got,) = [c for c in h.fake.of("getFile") if c.ok]
    assert got.args["file_id"] == question.document["file_id"]  # type: ignore[index]
    assert h.fake.downloads == [h.fake.files[got.args["file_id"]].path]
    assert (CHAT, "typing") in [(c, a) for c, a, _ in h.fake.actions]
    passages = await h.stores.files.load(f"telegram:{CHAT}")
    assert passages and passages[0].file == "report.txt"
    assert h.fake.refused() == []


async def test_a_one_file_question_finds_its_file_with_the_shipped_manual_present(
    make: Any,
) -> None:
    """Issue 42 on Telegram: a 90-character note beside the 57-passage manual; the note is
    the first passage the model reads."""
    turns = [
        Turn("Thought: The note may say.\nAction: lookup[launch code for project Bluebird]"),
        Turn("Thought: It does.\nFinal Answer: AMBER-7734"),
    ]
    manual = LookupTool(manual=Path(shipped.__file__).parent / "knowledge")
    h: Harness = await make(turns, files=FileLimits(), lookup=manual)
    note = b"The launch code for project Bluebird is AMBER-7734."
    question = h.fake.user_sends(
        CHAT,
        caption="What is the launch code for project Bluebird?",
        document=("notes.txt", note, "text/plain"),
    )
    assert "AMBER-7734" in (await h.answer_to(question)).text
    (trace,) = await h.stores.traces.list(f"telegram:{CHAT}")
    (step, *_) = trace.steps
    assert (step.observation or "").startswith(f"1. notes.txt\n{note.decode()}")
    assert step.sources[0] == "notes.txt"


async def test_a_photo_in_a_group_goes_to_a_vision_model_in_its_largest_size(make: Any) -> None:
    h: Harness = await make(
        [Turn("Thought: I see it.\nFinal Answer: A JPEG.")], files=FileLimits(), vision=True
    )
    question = h.fake.user_sends(
        GROUP, caption="@reactbot_test_bot what is this?", photo=JPEG, user=501
    )
    await h.fake.wait_for(
        lambda: any(m.reply_to == question.id and ended(m) for m in h.fake.bot_messages(GROUP)),
        within=15, what="the group's answer",
    )  # fmt: skip
    asked = h.model.calls[0].messages[-1]
    expected = f"data:image/jpeg;base64,{base64.b64encode(JPEG).decode()}"
    assert asked["images"] == [expected]  # the full size, not the thumbnail
    assert "what is this?" in asked["content"] and "@reactbot_test_bot" not in asked["content"]
    assert h.fake.refused() == []


async def test_files_telegram_refuses_or_over_the_limits_are_said_and_the_question_answered(
    make: Any,
) -> None:
    h: Harness = await make(
        [Turn("Thought: nothing to read.\nFinal Answer: No file.")] * 3,
        files=FileLimits(max_bytes=30 * MB),
    )
    # Over 20 MB: getFile refuses it ("file is too big"), as Telegram does for bots.
    big = h.fake.user_sends(
        CHAT, caption="read it", document=("big.txt", b"a" * (21 * MB), "text/plain")
    )
    await h.answer_to(big)
    await h.bot.answering.settled()
    assert any("big.txt: Telegram gives bots files of at most 20 MB" in t for t in _notes(h))
    (too_big,) = h.fake.of("getFile")
    assert too_big.error is not None and too_big.error.description == "Bad Request: file is too big"
    # A file_id Telegram no longer knows: "invalid file_id".
    gone = h.fake.user_sends(CHAT, caption="and this", document=("gone.txt", b"x", "text/plain"))
    del h.fake.files[gone.document["file_id"]]  # type: ignore[index]
    await h.answer_to(gone)
    await h.bot.answering.settled()
    assert any("gone.txt: Telegram refused it (Invalid file_id)" in t for t in _notes(h))
    # A path off Telegram's file host is never downloaded.
    odd = h.fake.user_sends(CHAT, caption="this?", document=("odd.txt", b"y", "text/plain"))
    file_id = odd.document["file_id"]  # type: ignore[index]
    h.fake.files[file_id] = replace(h.fake.files[file_id], path="../../../etc/passwd")
    await h.answer_to(odd)
    await h.bot.answering.settled()
    assert any("odd.txt: not downloaded, it is not on Telegram's file host" in t for t in _notes(h))
    assert h.fake.downloads == []
    h.model.assert_complete()  # each of the three questions answered
    refused = {c.error.description for c in h.fake.refused() if c.error is not None}
    assert refused == {"Bad Request: file is too big", "Bad Request: invalid file_id"}


async def test_a_file_over_files_max_bytes_is_refused_without_asking_telegram(make: Any) -> None:
    h: Harness = await make(
        [Turn("Thought: none.\nFinal Answer: No file.")], files=FileLimits(max_bytes=1000)
    )
    question = h.fake.user_sends(CHAT, caption="q", document=("a.txt", b"z" * 2000, "text/plain"))
    await h.answer_to(question)
    await h.bot.answering.settled()
    assert any("a.txt: larger than 1,000 bytes" in t for t in _notes(h))
    assert h.fake.of("getFile") == [] and h.fake.refused() == []


async def test_typing_is_renewed_while_the_block_runs_and_stops_after() -> None:
    async with FakeTelegram() as fake:
        fake.user_says(CHAT, "hi")  # the chat exists once a person opened it
        async with Bot(fake.token, base_url=fake.base_url) as bot:
            async with typing(bot, CHAT, every=0.2):
                await asyncio.sleep(0.7)
            count = len(fake.actions)
            await asyncio.sleep(0.4)
        assert 3 <= count <= 5 and len(fake.actions) == count
        assert {(c, a) for c, a, _ in fake.actions} == {(CHAT, "typing")}
        gaps = [b - a for (_, _, a), (_, _, b) in zip(fake.actions, fake.actions[1:], strict=False)]
        assert all(gap >= 0.15 for gap in gaps)
