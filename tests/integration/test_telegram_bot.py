"""Telegram through the real python-telegram-bot client (polling) against the strict fake:
a private-chat question answered in one message edited live, Stop from its inline button,
a hostile answer that ends in a final state Telegram accepts, a 429 waited out, /reset and
a chat that may not ask. The fake refuses what Telegram refuses, so ``fake.refused() == []``
says no edit was identical ("message is not modified"), too long, or bad HTML."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from adapters import words
from adapters.attachments import ConversationFiles
from adapters.channels import ChannelChoices
from adapters.room import Room
from adapters.telegram.bot import TelegramBot
from adapters.telegram.files import telegram_downloader
from adapters.telegram.render import STOP_PREFIX
from adapters.telegram.settings import TelegramSettings
from adapters.voice import Hearing
from core.agent import Agent, AgentSettings
from core.approval import ApprovalBroker, InMemoryDecisions, InMemoryPending
from core.budgets import InMemoryUsageCounters, TokenBudgets
from core.file_workers import FileReaders
from core.files import FileLimits
from core.scripted import ScriptedModel, Turn
from core.stores import Stores
from core.stores.redis import RedisStores
from core.tools import FunctionTool, Tool, ToolHints, ToolRegistry
from tests.fakes.telegram_server import MESSAGE_LIMIT, FakeTelegram, Message, parse_html, utf16_len
from tests.stores import in_memory_stores
from tests.surfaces.policy import split

CHAT = 4242
CALC = [
    Turn("Thought: I will use the calculator.\nAction: calculate[17*23+4]", delay=0.05),
    Turn("Thought: I have it.\nFinal Answer: 17*23+4 = 395", delay=0.05),
]

SLOW = [
    Turn("Thought: I will use the calculator.\nAction: calculate[17*23+4]", chunk_size=4,
         delay=0.1),
    Turn("Thought: I have it, and I am writing it down slowly.\nFinal Answer: 17*23+4 = 395",
         chunk_size=4, delay=0.15),
]  # fmt: skip


def ended(message: Message) -> bool:
    """An answer's message once final: edited, and its Stop gone (votes may stay under an
    answer, Retry under an interrupted one)."""
    stops = [b for b in message.buttons if b["callback_data"].startswith(STOP_PREFIX)]
    return bool(message.edits) and not stops


@dataclass
class Harness:
    fake: FakeTelegram
    bot: TelegramBot
    stores: Stores
    model: ScriptedModel
    deleted: list[str]

    def replies(self) -> list[Message]:
        return self.fake.bot_messages(CHAT)

    async def answer_to(self, question: Message, *, within: float = 15.0) -> Message:
        """The bot's reply to ``question`` once it is final (no Stop button left)."""

        def final() -> Message | None:
            for m in self.replies():
                if m.reply_to == question.id and ended(m):
                    return m
            return None

        await self.fake.wait_for(lambda: final() is not None, within=within, what="a final")
        found = final()
        assert found is not None
        return found

    async def live(self, question: Message) -> Message:
        def running() -> Message | None:
            return next(
                (m for m in self.replies() if m.reply_to == question.id and m.buttons and m.edits),
                None,
            )  # edited once: the run is followed (and registered), so Stop can find it

        await self.fake.wait_for(lambda: running() is not None, what="the live message")
        found = running()
        assert found is not None
        return found


@pytest.fixture(autouse=True)
def _timedelta(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "true")


@pytest.fixture
async def make() -> AsyncIterator[Callable[..., Any]]:
    async with bots() as build:
        yield build


@contextlib.asynccontextmanager
async def bots() -> AsyncIterator[Callable[..., Any]]:
    """``make`` outside pytest's fixtures (the conformance drivers use it); the caller sets
    ``PTB_TIMEDELTA`` as the ``_timedelta`` fixture does."""
    opened: list[tuple[FakeTelegram, TelegramBot, ApprovalBroker, FileReaders | None]] = []

    async def build(
        turns: list[Turn],
        *,
        approval: bool = False,
        files: FileLimits | None = None,
        vision: bool = False,
        shared: RedisStores | None = None,
        room: Room | None = None,
        hearing: Hearing | None = None,
        extra_tools: Sequence[Tool] = (),
        lookup: Tool | None = None,
        **settings: Any,
    ) -> Harness:
        """``files``: documents and photos are read, within these limits (in worker
        processes, as served); ``vision``: the model reads images; ``shared``: one replica
        of several, its stop requests and runs in flight on this real Redis; ``lookup``:
        the agent's own (the shipped manual, as a fresh clone has it)."""
        fake = FakeTelegram()
        await fake.__aenter__()
        broker = ApprovalBroker(InMemoryDecisions(), InMemoryPending())
        deleted: list[str] = []

        async def delete(path: str) -> str:
            deleted.append(path)
            return f"deleted {path}"

        tools = ToolRegistry()
        tools.add(FunctionTool("files_delete", delete, "Deletes a file.", "files_delete[a.txt]"))
        tools.add(
            FunctionTool(
                "calculate", _calculate, "Arithmetic.", "calculate[2+2]",
                hints=ToolHints(read_only=True),
            )
        )  # fmt: skip
        for tool in extra_tools:
            tools.add(tool)
        if lookup is not None:
            tools.add(lookup)
        stores = (
            Stores.in_memory()
            if shared is None
            else in_memory_stores(stops=shared.stops, runs=shared.runs)
        )
        readers = FileReaders() if files is not None else None
        conversation_files = (
            ConversationFiles(
                stores.files,
                telegram_downloader(fake.base_url, max_bytes=files.max_bytes, timeout=5),
                files,
                reader=readers,
                hearing=hearing or Hearing(),
            )
            if files is not None and readers is not None
            else None
        )
        model = ScriptedModel(turns)
        agent = Agent(
            model,
            tools,
            stores=stores,
            approve=broker,
            settings=AgentSettings(
                model_timeout=5.0,
                deadline=20.0,
                approval_timeout=20.0,
                approval_tools=frozenset({"files_delete"}) if approval else frozenset(),
            ),
        )
        own, policy = split("telegram", **{"cooldown_seconds": 0.0, **settings})
        bot = TelegramBot(
            agent,
            stores=stores,
            budgets=TokenBudgets(InMemoryUsageCounters()),
            choices=ChannelChoices(
                stores.channel_settings, {}, tools, default_model=model.name, default_vision=vision
            ),
            settings=TelegramSettings(
                token=fake.token, api_base_url=fake.base_url, poll_timeout=1.0, **own
            ),
            policy=policy,
            broker=broker,
            files=conversation_files,
            room=room,
        )
        opened.append((fake, bot, broker, readers))
        await bot.start()
        return Harness(fake, bot, stores, model, deleted)

    try:
        yield build
    finally:
        for fake, bot, broker, readers in opened:
            await bot.aclose(grace=2.0)
            await broker.aclose()
            if readers is not None:
                await readers.aclose()
            await fake.__aexit__(None, None, None)


async def _calculate(expression: str) -> str:
    return {"17*23+4": "395"}.get(expression.strip(), "I only know one sum")


def _styles(html: str) -> set[str]:
    return {e["type"] for e in parse_html(html)[1]}


async def test_a_private_question_is_answered_live_then_finally(make: Any) -> None:
    h: Harness = await make(SLOW)  # step 2 streams for over 2 s: a live edit shows step 1
    question = h.fake.user_says(CHAT, "What is 17*23+4?")
    final = await h.answer_to(question)
    assert "17*23+4 = 395" in final.text
    assert "✅" in final.text and [b["text"] for b in final.buttons] == ["👍", "👎"]
    edits = [c for c in h.fake.of("editMessageText") if c.ok]
    assert len(edits) >= 2  # live states, then the final one
    seen = set().union(*(_styles(c.args["text"]) for c in edits))
    assert {"italic", "bold", "code", "blockquote"} <= seen  # thought, action, input, observation
    assert all(c.args["parse_mode"] == "HTML" for c in edits)
    assert h.fake.refused() == []  # never "not modified", never bad HTML, never too long
    h.model.assert_complete()
    history = await h.stores.history.load(f"telegram:{CHAT}")
    assert history[-1]["content"] == "17*23+4 = 395"
    await h.bot.answering.settled()  # the trace is replied under the answer after it
    steps, md, js = [m for m in h.replies() if m.reply_to == final.id]
    assert steps.text.startswith("Step 1") and "🛠 calculate 17*23+4" in steps.text
    names = [n for c, n, _ in h.fake.documents if c == CHAT]
    trace_id = (await h.stores.traces.list(f"telegram:{CHAT}"))[0].id
    assert names == [f"trace-{trace_id}.md", f"trace-{trace_id}.json"]
    assert md.document is not None and js.document is not None
    assert md.text.startswith(f"🧾 Trace {trace_id}")
    assert h.fake.refused() == []


async def test_stop_from_the_inline_button(make: Any) -> None:
    h: Harness = await make([Turn("Thought: this takes a long while", chunk_size=4, stall_after=3)])
    question = h.fake.user_says(CHAT, "a slow one")
    live = await h.live(question)
    (stop,) = live.buttons
    assert len(stop["callback_data"].encode()) <= 64
    query = h.fake.press(live, stop["callback_data"])
    final = await h.answer_to(question)
    assert final.text.startswith("⏹️ Stopped by user")
    await h.fake.wait_for(lambda: query in h.fake.answered, what="answerCallbackQuery")
    assert h.fake.answered[query]["text"] == "Stopping…"
    assert h.fake.refused() == []
    await h.bot.answering.settled()
    (trace,) = await h.stores.traces.list(f"telegram:{CHAT}")
    assert (trace.stopped_by, trace.stopped_by_id) == (f"user{CHAT}", str(CHAT))


async def test_every_press_is_answered_even_one_the_bot_does_not_know(make: Any) -> None:
    h: Harness = await make([Turn("Thought: slow", chunk_size=2, stall_after=2)])
    question = h.fake.user_says(CHAT, "slow")
    live = await h.live(question)
    (stop,) = live.buttons
    other = h.fake.press(live, stop["callback_data"], user=CHAT + 1)  # not the asker
    await h.fake.wait_for(lambda: other in h.fake.answered, what="answerCallbackQuery")
    assert h.fake.answered[other]["text"] == words.stop_refused()
    assert h.bot.answering.running  # still going
    h.fake.press(h.fake.message(CHAT, live.id), stop["callback_data"])
    await h.answer_to(question)


async def test_a_hostile_answer_ends_in_a_state_telegram_accepts(make: Any) -> None:
    url = "https://evil.example/" + "a" * 10_000
    hostile = (
        f'{url} <b><i> unbalanced & <a href="tg://user?id=1">x</a> '
        "[click me](https://evil.example/phish) \u202egnp.exe"
    )
    h: Harness = await make([Turn(f"Thought: {hostile}\nFinal Answer: {hostile}", chunk_size=500)])
    question = h.fake.user_says(CHAT, "<b>hi</b>")
    final = await h.answer_to(question)
    await h.bot.answering.settled()  # the rest of the answer is replied after the final edit
    parts = [final] + [m for m in h.replies() if m.reply_to == final.id]
    assert len(parts) >= 3  # 10,000+ characters in messages of at most 4,096
    assert h.fake.refused() == []
    for message in parts:
        assert utf16_len(message.text) <= MESSAGE_LIMIT
        assert not {"text_link", "text_mention"} & {e["type"] for e in message.entities}
        assert "\u202e" not in message.text
    body, footer = final.text.rsplit("\n", 1)  # the first part, then the run's summary
    assert footer.startswith("✅")
    shown = "".join("".join(t.split()) for t in [body] + [m.text for m in parts[1:]])
    # All of it, as text: the URL whole, the HTML literal, the Markdown link shown with its URL.
    expected = hostile.replace("\u202e", "\ufffd").replace(
        "[click me](https://evil.example/phish)", "click me (https://evil.example/phish)"
    )
    assert "".join(expected.split()) in shown


async def test_a_429_is_waited_out(make: Any) -> None:
    h: Harness = await make(SLOW)
    question = h.fake.user_says(CHAT, "What is 17*23+4?")
    await h.live(question)
    h.fake.flood(CHAT, 2)  # the next write in the chat answers 429, retry_after 2
    final = await h.answer_to(question, within=20.0)
    assert "395" in final.text
    limited = [c for c in h.fake.calls if c.error is not None and c.error.code == 429]
    assert len(limited) == 1 and h.fake.violations == 0  # nothing more until it had passed
    assert h.bot.pacer.stats.rate_limited == 1
    after = [c for c in h.fake.calls if c.at > limited[0].at and c.method != "getupdates"]
    assert after and after[0].at - limited[0].at >= 2.0  # the fake's own clock, not ours


async def test_trace_sends_the_last_traces_documents(make: Any) -> None:
    h: Harness = await make(CALC)
    nothing = h.fake.user_says(CHAT, "/trace")
    await h.fake.wait_for(
        lambda: any(m.reply_to == nothing.id for m in h.replies()), what="a reply"
    )
    assert words.NO_TRACE in h.replies()[-1].text
    question = h.fake.user_says(CHAT, "What is 17*23+4?")
    await h.answer_to(question)
    await h.bot.answering.settled()
    asked = h.fake.user_says(CHAT, "/trace")
    await h.fake.wait_for(
        lambda: len([m for m in h.replies() if m.reply_to == asked.id]) == 2, what="documents"
    )
    md, js = [m for m in h.replies() if m.reply_to == asked.id]
    assert md.document is not None and md.document["file_name"].endswith(".md")
    assert js.document is not None and js.document["file_name"].endswith(".json")


async def test_reset_forgets_the_conversation(make: Any) -> None:
    h: Harness = await make(CALC)
    question = h.fake.user_says(CHAT, "What is 17*23+4?")
    await h.answer_to(question)
    assert await h.stores.history.load(f"telegram:{CHAT}")
    h.fake.user_says(CHAT, "/reset")
    await h.fake.wait_for(
        lambda: any(words.RESET_DONE in m.text for m in h.replies()), what="the reset's reply"
    )
    assert await h.stores.history.load(f"telegram:{CHAT}") == []


async def test_a_vote_is_kept_once_per_person_and_only_from_the_answers_own_chat(
    make: Any,
) -> None:
    h: Harness = await make(CALC * 2)
    answer = await h.answer_to(h.fake.user_says(CHAT, "What is 17*23+4?"))
    run_id = answer.buttons[0]["callback_data"].rpartition(":")[2]
    for data in (answer.buttons[0]["callback_data"], answer.buttons[1]["callback_data"]):
        query = h.fake.press(answer, data)  # 👍, then 👎: the second replaces the first
        await h.fake.wait_for(lambda q=query: q in h.fake.answered, what="the vote's answer")
    assert h.fake.answered[query]["text"] == words.vote_kept("down")
    other = CHAT + 1  # another person's private chat with the bot
    asked = h.fake.user_says(other, "What is 17*23+4?", user=other)

    def answered() -> Message | None:
        return next((m for m in h.fake.bot_messages(other) if m.reply_to == asked.id), None)

    await h.fake.wait_for(lambda: (m := answered()) is not None and ended(m), what="answered")
    elsewhere = answered()
    assert elsewhere is not None
    forged = h.fake.press(elsewhere, f"vote:up:{run_id}", user=other, spoofed=True)
    await h.fake.wait_for(lambda: forged in h.fake.answered, what="the forged vote's answer")
    assert h.fake.answered[forged]["text"] == words.VOTE_LOST
    trace = await h.stores.traces.get(run_id)
    assert trace is not None and [v.value for v in trace.votes] == ["down"]


async def test_a_chat_not_allowed_is_told_so_and_nothing_runs(make: Any) -> None:
    h: Harness = await make([], allowed_chats=frozenset({1}))
    question = h.fake.user_says(CHAT, "hello?")
    await h.fake.wait_for(lambda: bool(h.replies()), what="the refusal")
    (refusal,) = h.replies()
    # a private chat not in allowed_chats: the shared words for a closed DM
    assert refusal.text == words.DMS_CLOSED and refusal.reply_to == question.id
    h.model.assert_complete()


DELETE = [
    Turn("Thought: I will delete it.\nAction: files_delete[a.txt]"),
    Turn("Thought: done.\nFinal Answer: a.txt is gone"),
]


async def test_an_action_is_approved_from_its_buttons_by_the_asker_only(make: Any) -> None:
    h: Harness = await make(DELETE, approval=True)
    question = h.fake.user_says(CHAT, "delete a.txt")

    def waiting() -> Message | None:
        return next((m for m in h.replies() if len(m.buttons) > 1), None)

    await h.fake.wait_for(lambda: waiting() is not None, what="the approval buttons")
    asking = waiting()
    assert asking is not None and "Approve this action?" in asking.text
    approve, edit, deny, reason, *_, stop = (b["callback_data"] for b in asking.buttons)
    assert approve.startswith("ok:a:") and edit.startswith("ok:e:") and deny.startswith("ok:d:")
    assert reason.startswith("ok:r:") and stop.startswith("stop:")
    assert all(len(b["callback_data"].encode()) <= 64 for b in asking.buttons)
    other = h.fake.press(asking, approve, user=CHAT + 1)
    await h.fake.wait_for(lambda: other in h.fake.answered, what="the answer to the other")
    assert h.fake.answered[other]["text"] == words.decide_refused("asker")
    # A modified client names itself the asker in the data: the run's own request decides.
    forged = approve.rsplit(":", 1)[0] + f":{CHAT + 1}"
    spoof = h.fake.press(asking, forged, user=CHAT + 1, spoofed=True)
    await h.fake.wait_for(lambda: spoof in h.fake.answered, what="the answer to the spoof")
    assert h.fake.answered[spoof]["text"] == words.decide_refused("asker")
    assert h.deleted == []
    mine = h.fake.press(h.fake.message(CHAT, asking.id), approve)
    final = await h.answer_to(question)
    assert "a.txt is gone" in final.text and h.deleted == ["a.txt"]
    assert h.fake.answered[mine]["text"] == "Approved."
    assert h.fake.refused() == []
    await h.bot.answering.settled()
    (trace,) = await h.stores.traces.list(f"telegram:{CHAT}")
    approval = trace.steps[0].approval
    assert approval is not None and (approval.by, approval.by_id) == (f"user{CHAT}", str(CHAT))


async def test_a_denied_action_never_runs(make: Any) -> None:
    h: Harness = await make(
        [DELETE[0], Turn("Thought: not allowed.\nFinal Answer: I did not delete it")],
        approval=True,
    )
    question = h.fake.user_says(CHAT, "delete a.txt")
    await h.fake.wait_for(lambda: any(len(m.buttons) > 1 for m in h.replies()), what="buttons")
    asking = next(m for m in h.replies() if len(m.buttons) > 1)
    h.fake.press(asking, _button(asking, "ok:d:"))
    final = await h.answer_to(question)
    assert "I did not delete it" in final.text and h.deleted == []


def _button(message: Message, prefix: str) -> str:
    return next(
        b["callback_data"] for b in message.buttons if b["callback_data"].startswith(prefix)
    )


async def _asking(h: Harness, chat: int = CHAT) -> Message:
    def waiting() -> Message | None:
        return next((m for m in h.fake.bot_messages(chat) if len(m.buttons) > 1), None)

    await h.fake.wait_for(lambda: waiting() is not None, what="the approval buttons")
    found = waiting()
    assert found is not None
    return found


async def _prompted(h: Harness, under: Message, query: str, chat: int = CHAT) -> Message:
    """The ForceReply prompt the press ``query`` sent under the live message ``under``."""
    await h.fake.wait_for(lambda: query in h.fake.answered, what="answerCallbackQuery")

    def prompt() -> Message | None:
        return next(
            (m for m in h.fake.bot_messages(chat)
             if m.reply_to == under.id and (m.reply_markup or {}).get("force_reply")),
            None,
        )  # fmt: skip

    await h.fake.wait_for(lambda: prompt() is not None, what="the prompt")
    found = prompt()
    assert found is not None
    return found


async def test_edit_asks_for_the_new_input_in_a_force_reply_and_the_reply_runs_it(
    make: Any,
) -> None:
    h: Harness = await make(DELETE, approval=True)
    question = h.fake.user_says(CHAT, "delete a.txt")
    asking = await _asking(h)
    query = h.fake.press(asking, _button(asking, "ok:e:"))
    prompt = await _prompted(h, asking, query)
    assert h.fake.answered[query]["text"] == "Reply to my message with the new input."
    assert "new input for files_delete" in prompt.text and "Now: a.txt" in prompt.text
    assert prompt.reply_markup is not None and prompt.reply_markup["input_field_placeholder"]
    someone = h.fake.user_says(CHAT, "c.txt", user=CHAT + 1, reply_to=prompt)  # not the asker
    await h.fake.wait_for(lambda: any(m.reply_to == someone.id for m in h.replies()), what="no")
    assert [m.text for m in h.replies() if m.reply_to == someone.id] == [
        words.decide_refused("asker")
    ]
    h.fake.user_says(CHAT, "b.txt", reply_to=prompt)
    final = await h.answer_to(question)
    assert h.deleted == ["b.txt"] and "a.txt is gone" in final.text
    trace = (await h.stores.traces.list(f"telegram:{CHAT}"))[0]
    assert trace.steps[0].action_input == "b.txt"
    h.model.assert_complete()  # the reply to the prompt started no question of its own
    assert h.fake.refused() == []


async def test_deny_with_a_reason_from_a_force_reply(make: Any) -> None:
    h: Harness = await make(
        [DELETE[0], Turn("Thought: refused.\nFinal Answer: I did not delete it")], approval=True
    )
    question = h.fake.user_says(GROUP, "/ask delete a.txt", user=ALICE)
    asking = await _asking(h, GROUP)
    query = h.fake.press(asking, _button(asking, "ok:r:"), user=ALICE)
    prompt = await _prompted(h, asking, query, GROUP)
    assert "why files_delete should not run" in prompt.text
    h.fake.user_says(GROUP, "not on a Friday", user=ALICE, reply_to=prompt)
    final = await _group_answer(h, question)
    assert "I did not delete it" in final.text and h.deleted == []
    trace = (await h.stores.traces.list(f"telegram:{GROUP}"))[0]
    assert "not on a Friday" in (trace.steps[0].observation or "")
    late = h.fake.user_says(GROUP, "changed my mind", user=ALICE, reply_to=prompt)
    await h.fake.wait_for(lambda: bool(_group_replies(h, late)), what="the late reply's answer")
    assert _group_replies(h, late)[0].text == (words.DECISION_GONE)
    assert h.fake.refused() == []


# ---- groups and forum topics ----------------------------------------------------------------

GROUP, ALICE, BOB = -100123, 501, 502


def _group_replies(h: Harness, question: Message) -> list[Message]:
    return [m for m in h.fake.bot_messages(GROUP) if m.reply_to == question.id]


async def _group_answer(h: Harness, question: Message) -> Message:
    def final() -> Message | None:
        return next((m for m in _group_replies(h, question) if ended(m)), None)

    await h.fake.wait_for(lambda: final() is not None, within=20.0, what="the group's answer")
    found = final()
    assert found is not None
    return found


async def test_in_a_group_a_mention_a_reply_and_ask_are_questions(make: Any) -> None:
    h: Harness = await make(CALC * 3)
    chatter = h.fake.user_says(GROUP, "lunch anyone?", user=BOB)  # not for the bot
    mention = h.fake.user_says(GROUP, "@reactbot_test_bot What is 17*23+4?", user=ALICE)
    first = await _group_answer(h, mention)
    assert "395" in first.text and not first.thread
    reply = h.fake.user_says(GROUP, "and again?", user=BOB, reply_to=first)
    assert "395" in (await _group_answer(h, reply)).text
    ask = h.fake.user_says(GROUP, "/ask@reactbot_test_bot What is 17*23+4?", user=ALICE)
    assert "395" in (await _group_answer(h, ask)).text
    assert _group_replies(h, chatter) == []
    h.model.assert_complete()  # three questions, three runs: the chatter started none
    history = await h.stores.history.load(f"telegram:{GROUP}")
    assert history[0]["content"].endswith("What is 17*23+4?")  # the mention taken out
    assert "@reactbot_test_bot" not in history[0]["content"]
    assert h.fake.refused() == []


async def test_a_forum_topic_is_its_own_conversation_and_the_answer_stays_in_it(
    make: Any,
) -> None:
    h: Harness = await make(CALC)
    question = h.fake.user_says(GROUP, "/ask What is 17*23+4?", user=ALICE, thread=77)
    final = await _group_answer(h, question)
    assert final.thread == 77 and "395" in final.text
    assert await h.stores.history.load(f"telegram:{GROUP}:77")
    assert await h.stores.history.load(f"telegram:{GROUP}") == []
    assert h.fake.refused() == []


async def test_in_a_group_only_the_asker_or_an_admin_stops_and_resets(make: Any) -> None:
    h: Harness = await make(
        [Turn("Thought: slow", chunk_size=2, stall_after=2)], admins=frozenset({BOB + 1})
    )
    question = h.fake.user_says(GROUP, "/ask slow", user=ALICE)
    await h.fake.wait_for(
        lambda: any(m.edits for m in _group_replies(h, question)), what="the live message"
    )
    (live,) = _group_replies(h, question)
    (stop,) = live.buttons
    refused = h.fake.press(live, stop["callback_data"], user=BOB)
    await h.fake.wait_for(lambda: refused in h.fake.answered, what="the answer to Bob")
    assert h.fake.answered[refused]["text"] == words.stop_refused()
    h.fake.press(h.fake.message(GROUP, live.id), stop["callback_data"], user=BOB + 1)  # admin
    final = await _group_answer(h, question)
    assert final.text.startswith("⏹️ Stopped by")
    reset = h.fake.user_says(GROUP, "/reset", user=ALICE)
    await h.fake.wait_for(lambda: bool(_group_replies(h, reset)), what="the reset's reply")
    assert _group_replies(h, reset)[0].text == words.RESET_ADMINS


async def test_the_trace_names_the_asker_and_the_group_and_keeps_the_ids(make: Any) -> None:
    h: Harness = await make(CALC * 2)
    mention = h.fake.user_says(GROUP, "@reactbot_test_bot What is 17*23+4?", user=ALICE)
    await _group_answer(h, mention)
    private = h.fake.user_says(CHAT, "What is 17*23+4?")
    await h.answer_to(private)
    await h.bot.answering.settled()
    (group_trace,) = await h.stores.traces.list(f"telegram:{GROUP}")
    assert (group_trace.user, group_trace.user_id) == (f"user{ALICE}", str(ALICE))
    assert group_trace.channel == f"group{GROUP}"  # the group's title
    (dm_trace,) = await h.stores.traces.list(f"telegram:{CHAT}")
    assert (dm_trace.user_id, dm_trace.channel) == (str(CHAT), "DM")
