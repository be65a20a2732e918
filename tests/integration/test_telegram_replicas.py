"""Two Telegram bot processes sharing one real Redis (each its own client, each polling
its own strict fake: Telegram hands an update to whichever process it reaches): a Stop
forged or replayed at the process that does not run the run, from another chat or by
someone who is not the asker, does nothing and says which (the presser may not stop it, or
the button is for an answer somewhere else) and the run goes on; the asker's own Stop,
pressed there in the run's chat, stops it. Who may stop, and from where, is the run's own record's word, never the
callback data's (a client writes any callback data; every group member reads a run id)."""

from __future__ import annotations

from typing import Any

from adapters import words
from adapters.telegram.render import Button, TelegramPayload
from core.scripted import Turn
from core.stores.redis import RedisStores
from tests.integration import test_telegram_bot
from tests.integration.test_telegram_bot import ALICE, BOB, GROUP, Harness

make = test_telegram_bot.make
"""The Telegram harness fixture (the real client, the bot, the strict fake)."""

STALLING = [Turn("Thought: this takes a long while", chunk_size=4, stall_after=3)]
ADMIN = 909


async def _live_in_group(h: Harness) -> tuple[str, str]:
    """Alice asks in the group at ``h``; the run's id and its Stop button's data."""
    question = h.fake.user_says(GROUP, "/ask a slow one", user=ALICE)

    def live() -> bool:
        return any(
            m.reply_to == question.id and m.buttons and m.edits for m in h.fake.bot_messages(GROUP)
        )

    await h.fake.wait_for(live, what="the live message")
    (message,) = [m for m in h.fake.bot_messages(GROUP) if m.reply_to == question.id]
    (stop,) = message.buttons
    data = str(stop["callback_data"])
    return data.split(":")[1], data


async def _answered(h: Harness, query: str) -> str:
    await h.fake.wait_for(lambda: query in h.fake.answered, what="answerCallbackQuery")
    return str(h.fake.answered[query]["text"])


async def test_a_forged_or_replayed_stop_at_another_process_is_refused(
    make: Any, two_processes: list[RedisStores]
) -> None:
    first, second = two_processes
    runs: Harness = await make(STALLING, shared=first, admins=frozenset({ADMIN}))
    other: Harness = await make([], shared=second, admins=frozenset({ADMIN}))
    run_id, data = await _live_in_group(runs)

    # Bob, an admin and Alice herself in their own private chats, at the other process: the
    # message they press under is theirs; the data is forged (naming the presser) or
    # replayed verbatim. Bob may not stop it anywhere; the admin and Alice may, but only
    # under the run's own message: a Stop acts only on the run of its place, and says so.
    said = {BOB: words.stop_refused(), ADMIN: words.NOT_ITS_PLACE, ALICE: words.NOT_ITS_PLACE}
    for presser in (BOB, ADMIN, ALICE):
        other.fake.user_says(presser, "/start")
        await other.fake.wait_for(lambda p=presser: bool(other.fake.bot_messages(p)))
        mine = other.fake.bot_messages(presser)[0]
        for sent in (f"stop:{run_id}:{presser}", data):
            query = other.fake.press(mine, sent, user=presser, spoofed=True)
            assert await _answered(other, query) == said[presser]
    # Bob in the group itself, replaying Alice's button: the right chat, not the asker.
    other.fake.user_says(GROUP, "lunch anyone?", user=BOB)  # the group, seen by this process
    copy = await other.bot.chat(GROUP).send(TelegramPayload("⏳", (Button("⏹ Stop", data),)))
    query = other.fake.press(other.fake.message(GROUP, copy), data, user=BOB)
    assert await _answered(other, query) == words.stop_refused()
    query = other.fake.press(
        other.fake.message(GROUP, copy), f"stop:{run_id}:{BOB}", user=BOB, spoofed=True
    )
    assert await _answered(other, query) == words.stop_refused()
    assert runs.bot.answering.running == (run_id,), "the run goes on"

    # Alice's own Stop, pressed where the run is not: it is stopped at its process.
    query = other.fake.press(other.fake.message(GROUP, copy), data, user=ALICE)
    assert await _answered(other, query) == "Stopping…"

    def stopped() -> bool:
        return any(m.text.startswith("⏹️ Stopped by") for m in runs.fake.bot_messages(GROUP))

    await runs.fake.wait_for(stopped, what="the run stopped")
    await runs.bot.answering.settled()
    (trace,) = await runs.stores.traces.list(f"telegram:{GROUP}")
    assert trace.stopped_by_id == str(ALICE)
    assert other.model.calls == [] and runs.fake.refused() == [] and other.fake.refused() == []
