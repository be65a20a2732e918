"""The strict Telegram fake, through the real python-telegram-bot client: it answers what
Telegram answers and refuses what Telegram refuses, the way Telegram refuses it."""

from __future__ import annotations

import html
from collections.abc import AsyncIterator

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import BadRequest, InvalidToken, RetryAfter

from tests.fakes.telegram_server import NOT_MODIFIED, FakeTelegram, parse_html

CHAT = 42


@pytest.fixture(autouse=True)
def _timedelta(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "true")  # RetryAfter.retry_after without a warning


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        fake.user_says(CHAT, "hello")
        yield fake


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[Bot]:
    async with Bot(fake.token, base_url=fake.base_url) as bot:
        yield bot


async def test_wrong_token_is_unauthorized(fake: FakeTelegram) -> None:
    with pytest.raises(InvalidToken, match="rejected"):
        async with Bot("999:wrong", base_url=fake.base_url):
            pass  # initialize() calls getMe
    refused = fake.refused()[-1]
    assert refused.error is not None
    assert (refused.error.code, refused.error.description) == (401, "Unauthorized")


async def test_send_and_edit_keep_plain_text_and_entities(fake: FakeTelegram, bot: Bot) -> None:
    sent = await bot.send_message(CHAT, "<b>bold</b> &amp; <i>it</i>", parse_mode="HTML")
    message = fake.message(CHAT, sent.message_id)
    assert message.text == "bold & it"
    assert [e["type"] for e in message.entities] == ["bold", "italic"]
    await bot.edit_message_text("plain now", chat_id=CHAT, message_id=sent.message_id)
    assert fake.message(CHAT, sent.message_id).text == "plain now"


async def test_too_long_text_is_refused(bot: Bot) -> None:
    await bot.send_message(CHAT, "x" * 4096)
    with pytest.raises(BadRequest, match="Message is too long"):
        await bot.send_message(CHAT, "x" * 4097)
    with pytest.raises(BadRequest, match="Message is too long"):  # UTF-16 units, as Telegram
        await bot.send_message(CHAT, "😀" * 2049)


async def test_identical_edit_is_not_modified(fake: FakeTelegram, bot: Bot) -> None:
    keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Stop", callback_data="s")]])
    sent = await bot.send_message(CHAT, "<b>a</b>", parse_mode="HTML", reply_markup=keyboard)
    with pytest.raises(BadRequest, match="not modified"):
        await bot.edit_message_text(
            "<b>a</b>", chat_id=CHAT, message_id=sent.message_id, parse_mode="HTML",
            reply_markup=keyboard,
        )  # fmt: skip
    assert fake.refused()[-1].error is not None
    assert fake.refused()[-1].error.description == NOT_MODIFIED
    # the same text without its markup is a change
    await bot.edit_message_text("<b>a</b>", chat_id=CHAT, message_id=sent.message_id,
                                parse_mode="HTML")  # fmt: skip


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("<b><i>x</b>", "Unmatched end tag"),
        ("<b>x", "Can't find end tag"),
        ("x</b>", "Unexpected end tag"),
        ("<script>x</script>", 'Unsupported start tag "script"'),
        ("a < b", "Unclosed start tag"),
        ("fish & chips", "Unsupported HTML entity"),
    ],
)
async def test_bad_html_cannot_be_parsed(fake: FakeTelegram, bot: Bot, text: str, why: str) -> None:
    with pytest.raises(BadRequest, match="Can't parse entities"):
        await bot.send_message(CHAT, text, parse_mode="HTML")
    error = fake.refused()[-1].error  # as sent (the client rewords the first letters)
    assert error is not None
    assert error.description.startswith("Bad Request: can't parse entities: ")
    assert why in error.description


async def test_long_callback_data_is_refused(bot: Bot) -> None:
    await bot.send_message(
        CHAT, "ok", reply_markup=InlineKeyboardMarkup(
            [[InlineKeyboardButton("b", callback_data="x" * 64)]]),
    )  # fmt: skip
    with pytest.raises(BadRequest, match="Button_data_invalid"):
        await bot.send_message(
            CHAT, "no", reply_markup=InlineKeyboardMarkup(
                [[InlineKeyboardButton("b", callback_data="é" * 33)]]),  # 66 bytes
        )  # fmt: skip


async def test_editing_what_is_not_the_bots_is_not_found(fake: FakeTelegram, bot: Bot) -> None:
    theirs = fake.user_says(CHAT, "my own words")
    for message_id in (theirs.id, 9999):
        with pytest.raises(BadRequest, match="Message to edit not found"):
            await bot.edit_message_text("mine now", chat_id=CHAT, message_id=message_id)


async def test_reply_to_a_missing_message_is_refused(bot: Bot) -> None:
    with pytest.raises(BadRequest, match="Message to be replied not found"):
        await bot.send_message(CHAT, "re", reply_to_message_id=9999)


async def test_flood_answers_429_and_counts_who_ignores_it(fake: FakeTelegram, bot: Bot) -> None:
    fake.flood(CHAT, 30)
    with pytest.raises(RetryAfter) as caught:
        await bot.send_message(CHAT, "one")
    assert caught.value.retry_after.total_seconds() == 30  # type: ignore[union-attr]
    assert fake.violations == 0
    with pytest.raises(RetryAfter):
        await bot.send_message(CHAT, "too soon")
    assert fake.violations == 1


async def test_too_many_writes_in_a_window_answer_429() -> None:
    async with FakeTelegram(chat_writes=3, chat_window=60) as fake:
        fake.user_says(CHAT, "hi")
        async with Bot(fake.token, base_url=fake.base_url) as bot:
            for n in range(3):
                await bot.send_message(CHAT, str(n))
            with pytest.raises(RetryAfter):
                await bot.send_message(CHAT, "3")


async def test_callback_query_must_be_answered_once(fake: FakeTelegram, bot: Bot) -> None:
    keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Stop", callback_data="stop")]])
    sent = await bot.send_message(CHAT, "running", reply_markup=keyboard)
    query = fake.press(fake.message(CHAT, sent.message_id), "stop")
    assert await bot.answer_callback_query(query, text="Stopping")
    with pytest.raises(BadRequest, match="Query is too old"):
        await bot.answer_callback_query(query)


async def test_updates_are_long_polled_and_confirmed_by_offset(
    fake: FakeTelegram, bot: Bot
) -> None:
    first = await bot.get_updates(timeout=0)
    assert [u.message.text for u in first if u.message] == ["hello"]
    assert await bot.get_updates(offset=first[-1].update_id + 1, timeout=0) == ()
    fake.user_says(CHAT, "again")
    again = await bot.get_updates(offset=first[-1].update_id + 1, timeout=5)
    assert [u.message.text for u in again if u.message] == ["again"]


async def test_documents_and_chat_actions(fake: FakeTelegram, bot: Bot) -> None:
    await bot.send_chat_action(CHAT, "typing")
    sent = await bot.send_document(CHAT, b"# trace\n", filename="trace.md", caption="the trace")
    assert fake.documents == [(CHAT, "trace.md", b"# trace\n")]
    assert [(c, a) for c, a, _ in fake.actions] == [(CHAT, "typing")]
    assert sent.document is not None and sent.document.file_name == "trace.md"
    with pytest.raises(BadRequest):
        await bot.send_chat_action(CHAT, "dancing")


@given(st.text())
def test_escaped_text_parses_back_to_itself(text: str) -> None:
    assert parse_html(html.escape(text)) == (text, [])


async def test_get_file_and_the_file_host_are_strict(fake: FakeTelegram) -> None:
    bot = Bot(fake.token, base_url=fake.base_url, base_file_url=fake.base_file_url)
    await bot.initialize()
    sent = fake.user_sends(CHAT, caption="look", document=("a.txt", b"hello", "text/plain"))
    assert sent.document is not None
    file_id = sent.document["file_id"]
    url = f"{fake.base_file_url}{fake.token}/{fake.files[file_id].path}"
    async with aiohttp.ClientSession() as session:
        async with session.get(url) as early:  # no getFile yet: the path was never handed out
            assert early.status == 404 and (await early.json())["description"] == "Not Found"
        got = await bot.get_file(file_id)
        assert got.file_path == url and got.file_size == 5
        async with session.get(url) as response:
            assert response.status == 200 and await response.read() == b"hello"
        async with session.get(url.replace(fake.token, "1:wrong")) as stranger:
            assert stranger.status == 401
    assert bytes(await got.download_as_bytearray()) == b"hello"  # as the client itself fetches
    with pytest.raises(BadRequest, match="Invalid file_id"):
        await bot.get_file("no-such-file")
    huge = fake.add_file(b"\0" * (20 * 1024 * 1024 + 1), "documents", "huge.bin")
    with pytest.raises(BadRequest, match="File is too big"):
        await bot.get_file(huge.file_id)
    await bot.shutdown()
