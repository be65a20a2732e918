"""Telegram's ``/memory`` through the real client against the strict fake: in a group the
list goes to the person's private chat with the bot, or (never opened) only its count is
said; a hostile memory is listed inert; forgetting by id is the teller's alone."""

from __future__ import annotations

from typing import Any

from adapters import words
from core.memories import Holder, InMemoryMemories, Memories, Where
from tests.integration import test_telegram_bot
from tests.integration.test_telegram_bot import ALICE, BOB, GROUP, Harness
from tests.integration.test_telegram_settings import _reply
from tests.memories import memory

make = test_telegram_bot.make
"""The Telegram harness fixture (the real client, the bot, the strict fake)."""

HOSTILE = "@everyone [x](https://evil) <b>bold</b>"
IN_GROUP = Where("telegram", str(GROUP), f"telegram:{GROUP}", private=False)


async def test_memory_in_a_group_is_listed_privately_and_forgotten_by_its_teller(
    make: Any,
) -> None:
    h: Harness = await make([])
    memories = Memories(InMemoryMemories())
    h.bot.answering.agent.memories = memories
    told = memory("m0000beef", HOSTILE, by=str(ALICE), at=100.0, where=IN_GROUP)
    assert await memories.store.add(told, limit=10) is None

    counted = await _reply(h, h.fake.user_says(GROUP, "/memory", user=ALICE))
    assert counted == words.memory_count_only(1), "no private chat yet: only the count"
    assert await _reply(h, h.fake.user_says(ALICE, "/memory")) == words.MEMORY_NONE
    sent = await _reply(h, h.fake.user_says(GROUP, "/memory", user=ALICE))
    assert sent == words.MEMORY_SENT_PRIVATELY
    listed = h.fake.bot_messages(ALICE)[-1]
    assert f"m0000beef · {HOSTILE} · yours ·" in listed.text, "shown as the text it is"
    assert not [e for e in listed.entities if e["type"] in ("text_link", "bold", "mention")]

    refused = await _reply(h, h.fake.user_says(GROUP, "/memory forget m0000beef", user=BOB))
    assert refused == words.memory_not_found("“m0000beef”"), "Bob cannot forget Alice's"
    gone = await _reply(h, h.fake.user_says(GROUP, "/memory forget m0000beef", user=ALICE))
    assert gone == words.memory_forgotten("m0000beef")
    assert await memories.store.list(Holder.person("telegram", str(ALICE))) == []
    refusals = [(c.method, c.args["chat_id"], str(c.error)) for c in h.fake.refused()]
    assert refusals == [("sendmessage", ALICE, "Bad Request: chat not found")], "the first try"
