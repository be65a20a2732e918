"""Telegram's half of crash recovery, through the real client against the strict fake: an
answer a dead process left "thinking" (its record in the run registry, its heartbeat long
stopped) is finished by a live process: the message says it was interrupted, its Stop is
replaced by Retry, the trace is stored as interrupted; Retry asks the question again, as
whoever pressed it, in a reply to that message."""

from __future__ import annotations

import time
from typing import Any

from adapters import words
from adapters.recovery import INTERRUPTED
from adapters.telegram.render import Button, TelegramPayload
from core.approval import ApprovalRequest
from core.scripted import Turn
from core.stores import RunRecord
from core.trace import Trace
from tests.integration import test_telegram_bot
from tests.integration.test_telegram_bot import CHAT, Harness

make = test_telegram_bot.make
"""The Telegram harness fixture (the real client, the bot, the strict fake)."""


async def test_an_answer_a_dead_process_left_is_finished_with_retry(make: Any) -> None:
    h: Harness = await make([Turn("Thought: easy.\nFinal Answer: all is well")], run_lease=1.0)
    asked = h.fake.user_says(CHAT, "/start")  # the chat opened (a greeting, no question)
    left = await h.bot.chat(CHAT).send(  # what the dead process had posted, Stop and all
        TelegramPayload("<b>🤔 Thinking · step 1/8</b>", (Button("⏹ Stop", "stop:deadrun:4242"),)),
        reply_to=asked.id,
    )
    trace = Trace(question="what is up?", conversation=f"telegram:{CHAT}", id="deadrun")
    where = {"chat": str(CHAT), "message": str(left)}
    dead = RunRecord("deadrun", "telegram", trace.conversation, "dead", where,
                     trace=trace.to_json())  # fmt: skip
    await h.stores.runs.beat([dead], at=time.time() - 600)  # silent for ten minutes

    def finished() -> bool:
        return h.fake.message(CHAT, left).text.startswith("⚠️ Interrupted")

    await h.fake.wait_for(finished, within=10, what="the orphan finished")
    shown = h.fake.message(CHAT, left)
    assert shown.text == INTERRUPTED
    assert [b["callback_data"] for b in shown.buttons] == ["retry:deadrun"]
    stored = await h.stores.traces.get("deadrun")
    assert stored is not None and stored.status == "interrupted"
    assert not await h.stores.runs.running("telegram", "deadrun")
    query = h.fake.press(shown, "retry:deadrun", user=CHAT)
    await h.fake.wait_for(lambda: query in h.fake.answered, what="answerCallbackQuery")
    assert h.fake.answered[query]["text"] == "Asking again…"
    final = await h.answer_to(shown)  # the new answer replies to the interrupted message
    assert "all is well" in final.text
    assert "what is up?" in str(h.model.calls[0].messages[-1]["content"])
    h.model.assert_complete()
    assert h.fake.refused() == []


async def test_retry_of_a_question_no_longer_stored_says_so(make: Any) -> None:
    h: Harness = await make([], run_lease=1.0)
    h.fake.user_says(CHAT, "/start")
    left = await h.bot.chat(CHAT).send(TelegramPayload("⚠️ Interrupted", (Button("🔁 Retry",
                                       "retry:gone"),)))  # fmt: skip
    query = h.fake.press(h.fake.message(CHAT, left), "retry:gone", user=CHAT)
    await h.fake.wait_for(lambda: query in h.fake.answered, what="answerCallbackQuery")
    assert h.fake.answered[query]["text"] == words.RETRY_GONE
    h.model.assert_complete()


async def test_a_retry_naming_a_run_of_another_chat_is_refused(make: Any) -> None:
    # Callback data is any text: a run id read elsewhere must neither read out nor ask again
    # another chat's question (refused on the code before too; the rule is shared now).
    h: Harness = await make([], run_lease=1.0)
    trace = Trace(question="our secret plans?", conversation=f"telegram:{CHAT}", id="r1")
    await h.stores.traces.save(trace)
    mallory = CHAT + 7
    h.fake.user_says(mallory, "/start")
    await h.fake.wait_for(lambda: bool(h.fake.bot_messages(mallory)))
    mine = h.fake.bot_messages(mallory)[0]
    query = h.fake.press(mine, "retry:r1", user=mallory, spoofed=True)
    await h.fake.wait_for(lambda: query in h.fake.answered, what="answerCallbackQuery")
    assert h.fake.answered[query]["text"] == words.RETRY_GONE
    h.model.assert_complete()


async def test_presses_on_a_dead_processs_run_say_it_no_longer_runs(make: Any) -> None:
    """After a kill -9, Approve and Stop pressed under the dead process's message, here,
    before the sweep came to it: nothing runs it, and each press says so (never
    "Approved." or "Stopping…" with nothing behind it); the message is finished as
    interrupted at once, its buttons replaced by Retry."""
    h: Harness = await make([], approval=True)  # the default lease: the sweep is not due yet
    asked = h.fake.user_says(CHAT, "/start")
    buttons = (Button("✅ Approve", f"ok:a:deadrun:1:0:{CHAT}"), Button("⏹ Stop", "stop:deadrun"))
    left = await h.bot.chat(CHAT).send(
        TelegramPayload("<b>⏸ Waiting for approval</b>", buttons), reply_to=asked.id
    )
    conversation = f"telegram:{CHAT}"
    trace = Trace(question="delete it?", conversation=conversation, id="deadrun")
    where = {"chat": str(CHAT), "message": str(left)}
    dead = RunRecord("deadrun", "telegram", conversation, "dead", where, trace=trace.to_json(),
                     asker=str(CHAT))  # fmt: skip
    await h.stores.runs.beat([dead], at=time.time() - 60)  # its lease (25 s) long past
    assert h.bot.broker is not None
    await h.bot.broker.shared.put(
        ApprovalRequest(
            "deadrun",
            conversation,
            str(CHAT),
            1,
            0,
            "",
            "files_delete",
            "a.txt",
            json_input=False,
            timeout=60,
            remember=False,
        )
    )
    shown = h.fake.message(CHAT, left)
    for data in (f"ok:a:deadrun:1:0:{CHAT}", "stop:deadrun"):
        query = h.fake.press(shown, data, user=CHAT)
        await h.fake.wait_for(lambda q=query: q in h.fake.answered, what="answerCallbackQuery")
        assert h.fake.answered[query]["text"] == words.NOT_RUNNING, data

    def finished() -> bool:
        return h.fake.message(CHAT, left).text.startswith("⚠️ Interrupted")

    await h.fake.wait_for(finished, within=5, what="the orphan finished")
    assert [b["callback_data"] for b in h.fake.message(CHAT, left).buttons] == ["retry:deadrun"]
    h.model.assert_complete()
