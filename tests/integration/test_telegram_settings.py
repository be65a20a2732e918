"""Telegram's settings commands through the real client against the strict fake: anyone who
may ask reads them, admins change them (``telegram.admins``, and in a group the chat's
administrators from getChatAdministrators, cached), and a changed setting is what the next
answer uses."""

from __future__ import annotations

from typing import Any

from adapters import words
from adapters.telegram.commands import ONLY_ADMINS, PERSONA_USAGE
from core.scripted import Turn
from tests.fakes.telegram_server import Message
from tests.integration import test_telegram_bot
from tests.integration.test_telegram_bot import ALICE, BOB, CALC, CHAT, GROUP, Harness

make = test_telegram_bot.make
"""The Telegram harness fixture (the real client, the bot, the strict fake)."""


async def _reply(h: Harness, said: Message) -> str:
    def found() -> Message | None:
        return next((m for m in h.fake.bot_messages(said.chat) if m.reply_to == said.id), None)

    await h.fake.wait_for(lambda: found() is not None, what=f"the reply to {said.text!r}")
    reply = found()
    assert reply is not None
    return reply.text


async def test_in_a_private_chat_anyone_reads_and_only_telegram_admins_change(make: Any) -> None:
    h: Harness = await make(CALC, admins=frozenset({CHAT}))
    shown = await _reply(h, h.fake.user_says(CHAT, "/settings"))
    assert shown.splitlines()[0] == "Verbosity: full (the default)" and "Tools:" in shown
    other = CHAT + 7
    assert await _reply(h, h.fake.user_says(other, "/verbosity answer")) == ONLY_ADMINS
    assert await _reply(h, h.fake.user_says(CHAT, "/verbosity loud")) == (
        "Usage: /verbosity full|compact|answer|default"
    )
    said = h.fake.user_says(CHAT, "/verbosity answer")
    assert await _reply(h, said) == "Here people now see: answer."
    reply = next(m for m in h.fake.bot_messages(CHAT) if m.reply_to == said.id)
    assert any(e["type"] == "bold" for e in reply.entities)  # **answer**, drawn as HTML
    question = h.fake.user_says(CHAT, "What is 17*23+4?")
    final = await h.answer_to(question)
    assert "395" in final.text
    edits = [c.args["text"] for c in h.fake.of("editMessageText") if c.ok]
    assert not any("calculate" in e for e in edits)  # at "answer" no step is shown
    persona = h.fake.user_says(CHAT, "/persona You answer like a pirate.\nAlways.")
    assert await _reply(h, persona) == "This channel's persona is set (33 characters)."
    assert (await h.stores.channel_settings.get(f"telegram:{CHAT}"))["prompt"] == (
        "You answer like a pirate.\nAlways."
    )
    assert await _reply(h, h.fake.user_says(CHAT, "/persona")) == (
        f"{words.persona_shown(33)} {PERSONA_USAGE}"
    )
    assert await _reply(h, h.fake.user_says(CHAT, "/persona clear")) == words.PERSONA_CLEARED
    usage = await _reply(h, h.fake.user_says(CHAT, "/usage"))
    assert "token" in usage.lower()
    assert h.fake.of("getChatAdministrators") == []  # a private chat has none to ask for
    assert h.fake.refused() == []


async def test_in_a_group_the_chats_administrators_change_its_settings(make: Any) -> None:
    h: Harness = await make([Turn("Thought: t.\nFinal Answer: ok")])
    h.fake.set_admins(GROUP, [900, ALICE])  # a creator, and Alice an administrator
    listed = await _reply(h, h.fake.user_says(GROUP, "/tools", user=BOB))
    assert listed == "Tools: files_delete, calculate"
    refused = h.fake.user_says(GROUP, "/tools@reactbot_test_bot calculate", user=BOB)
    assert await _reply(h, refused) == ONLY_ADMINS
    toggled = await _reply(h, h.fake.user_says(GROUP, "/tools calculate", user=ALICE))
    assert toggled == "calculate is now off in this channel."
    assert await _reply(h, h.fake.user_says(GROUP, "/model nope", user=ALICE)) == (
        "⚠️ There is no model named 'nope'. No other models are configured (models: in the config)."
    )
    assert await _reply(h, h.fake.user_says(GROUP, "/reset", user=ALICE)) == (words.RESET_DONE)
    assert len(h.fake.of("getChatAdministrators")) == 1  # asked once, then remembered
    stored = await h.stores.channel_settings.get(f"telegram:{GROUP}")
    assert stored["tools_off"] == "calculate"
    topic = h.fake.user_says(GROUP, "/settings", user=BOB, thread=5)  # a topic follows its chat
    assert "off here: calculate" in await _reply(h, topic)
    assert h.fake.refused() == []
