"""Webhook mode against the strict fake and a real Redis: setWebhook with the secret, a
request without it refused, and one update delivered twice (Telegram's retry, at two
processes sharing the Redis) answered once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import pytest
from aiohttp import web

from adapters.channels import ChannelChoices
from adapters.telegram.bot import TelegramBot
from adapters.telegram.settings import TelegramSettings
from adapters.telegram.webhook import SECRET_HEADER, WebhookServer, webhook_secret
from core.agent import Agent, AgentSettings
from core.approval import ApprovalBroker
from core.budgets import InMemoryUsageCounters, TokenBudgets
from core.scripted import ScriptedModel, Turn
from core.stores import Stores
from core.tools import FunctionTool, ToolRegistry
from tests.fakes.local_server import serve_locally
from tests.fakes.telegram_server import FakeTelegram
from tests.integration.test_telegram_bot import ended
from tests.surfaces.policy import policy

CHAT = 31337
URL = "https://bot.example.com/telegram/hook"


@dataclass
class Process:
    bot: TelegramBot
    server: WebhookServer
    url: str
    model: ScriptedModel
    deleted: list[str]


@pytest.fixture(autouse=True)
def _timedelta(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "true")


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


TURNS = [Turn("Final Answer: 4")]


@pytest.fixture
async def processes(
    fake: FakeTelegram, redis_url: str, redis_prefix: str, request: pytest.FixtureRequest
) -> AsyncIterator[list[Process]]:
    """Two processes of one bot, each with its own Redis client on the same keys; each
    model answers with ``TURNS`` (or the test's ``turns`` marker)."""
    marker = request.node.get_closest_marker("turns")
    turns = marker.args[0] if marker is not None else TURNS
    made: list[tuple[Process, Stores, web.AppRunner, ApprovalBroker]] = []
    for _ in range(2):
        stores = Stores.redis(redis_url, prefix=redis_prefix)
        model = ScriptedModel(list(turns))
        deleted: list[str] = []

        async def delete(path: str, deleted: list[str] = deleted) -> str:
            deleted.append(path)
            return f"deleted {path}"

        tools = ToolRegistry()
        tools.add(FunctionTool("files_delete", delete, "Deletes a file.", "files_delete[a.txt]"))
        broker = ApprovalBroker(stores.decisions, stores.pending)
        agent = Agent(
            model, tools, stores=stores, approve=broker,
            settings=AgentSettings(deadline=20, approval_timeout=20,
                                   approval_tools=frozenset({"files_delete"})),
        )  # fmt: skip
        secret = webhook_secret(fake.token)
        bot = TelegramBot(
            agent,
            stores=stores,
            budgets=TokenBudgets(InMemoryUsageCounters()),
            choices=ChannelChoices(
                stores.channel_settings, {}, ToolRegistry(), default_model=model.name
            ),
            settings=TelegramSettings(
                token=fake.token,
                api_base_url=fake.base_url,
                mode="webhook",
                webhook_url=URL,
                webhook_secret=secret,
            ),
            policy=policy("telegram", cooldown_seconds=0.0),
            broker=broker,
        )
        server = WebhookServer(bot, path="/telegram/hook", secret=secret)
        runner, port = await serve_locally(server.application())
        await bot.start()
        process = Process(bot, server, f"http://127.0.0.1:{port}/telegram/hook", model, deleted)
        made.append((process, stores, runner, broker))
    yield [p for p, _, _, _ in made]
    for process, stores, runner, broker in made:
        await process.bot.aclose(grace=2.0)
        await broker.aclose()
        await runner.cleanup()
        await stores.aclose()


async def post(url: str, update: dict[str, object], *, secret: str | None) -> int:
    headers = {SECRET_HEADER: secret} if secret is not None else {}
    async with aiohttp.ClientSession() as http, http.post(url, json=update, headers=headers) as r:
        return r.status


async def test_the_webhook_is_set_with_its_secret_and_polling_never_starts(
    fake: FakeTelegram, processes: list[Process]
) -> None:
    assert fake.webhook is not None
    assert fake.webhook["url"] == URL
    assert fake.webhook["secret_token"] == webhook_secret(fake.token) != fake.token
    assert fake.of("getUpdates") == []


async def test_a_request_without_the_secret_is_refused(
    fake: FakeTelegram, processes: list[Process]
) -> None:
    fake.user_says(CHAT, "what is 2+2?")
    update = fake.updates[-1]
    first = processes[0]
    assert await post(first.url, update, secret=None) == 403
    assert await post(first.url, update, secret="guess") == 403
    assert fake.bot_messages(CHAT) == []
    assert first.model.calls == []


async def test_one_update_delivered_twice_is_answered_once(
    fake: FakeTelegram, processes: list[Process]
) -> None:
    question = fake.user_says(CHAT, "what is 2+2?")
    update, secret = fake.updates[-1], webhook_secret(fake.token)
    a, b = processes
    assert await post(a.url, update, secret=secret) == 200
    assert await post(b.url, update, secret=secret) == 200  # Telegram's retry, elsewhere
    assert await post(a.url, update, secret=secret) == 200
    await fake.wait_for(
        lambda: any(m.reply_to == question.id and ended(m) for m in fake.bot_messages(CHAT)),
        what="the answer",
    )  # fmt: skip
    for p in processes:
        await p.bot.answering.settled()
    answers = [m for m in fake.bot_messages(CHAT) if m.reply_to == question.id]
    assert len(answers) == 1 and "4" in answers[0].text
    assert a.server.duplicates + b.server.duplicates == 2
    assert fake.refused() == []


@pytest.mark.turns([Turn("Thought: this takes a long while", chunk_size=2, stall_after=2)])
async def test_stop_pressed_at_the_other_process_stops_the_run(
    fake: FakeTelegram, processes: list[Process]
) -> None:
    question = fake.user_says(CHAT, "a slow one")
    secret = webhook_secret(fake.token)
    a, b = processes
    assert await post(a.url, fake.updates[-1], secret=secret) == 200
    await fake.wait_for(
        lambda: any(m.buttons for m in fake.bot_messages(CHAT)), what="the live message"
    )
    (live,) = fake.bot_messages(CHAT)
    (stop,) = live.buttons
    # The pipeline registers the run in the shared store just after its message is posted
    # (adapters/dispatch/handlers/ask.py, _follow): a press at another process before that is told the
    # answer no longer runs. Its first edit comes after the registration: wait for that.
    await fake.wait_for(lambda: fake.message(CHAT, live.id).edits > 0, what="the first edit")
    query = fake.press(live, stop["callback_data"])
    assert await post(b.url, fake.updates[-1], secret=secret) == 200  # B does not run it
    await fake.wait_for(
        lambda: fake.message(CHAT, live.id).text.startswith("⏹️ Stopped by"), what="stopped"
    )
    assert fake.answered[query]["text"] == "Stopping…"
    assert question.id == live.reply_to
    assert b.model.calls == []


@pytest.mark.turns(
    [
        Turn("Thought: I will delete it.\nAction: files_delete[a.txt]"),
        Turn("Thought: done.\nFinal Answer: it is gone"),
    ]
)
async def test_edit_pressed_and_replied_at_the_other_process_runs_the_edited_input(
    fake: FakeTelegram, processes: list[Process]
) -> None:
    """Process A runs the answer; Edit… and the reply to its prompt both reach B, which
    reads the pending action from the shared store and sends the decision to A."""
    question = fake.user_says(CHAT, "delete a.txt")
    secret = webhook_secret(fake.token)
    a, b = processes
    assert await post(a.url, fake.updates[-1], secret=secret) == 200
    await fake.wait_for(
        lambda: any(len(m.buttons) > 1 for m in fake.bot_messages(CHAT)), what="the buttons"
    )
    (live,) = fake.bot_messages(CHAT)
    edit = next(x["callback_data"] for x in live.buttons if x["callback_data"].startswith("ok:e:"))
    query = fake.press(live, edit)
    assert await post(b.url, fake.updates[-1], secret=secret) == 200
    await fake.wait_for(lambda: len(fake.bot_messages(CHAT)) == 2, what="the prompt")
    prompt = fake.bot_messages(CHAT)[1]
    assert prompt.reply_to == live.id and "Now: a.txt" in prompt.text
    await fake.wait_for(lambda: query in fake.answered, what="answerCallbackQuery")
    assert fake.answered[query]["text"] == "Reply to my message with the new input."
    fake.user_says(CHAT, "b.txt", reply_to=prompt)
    assert await post(b.url, fake.updates[-1], secret=secret) == 200
    await fake.wait_for(
        lambda: "it is gone" in fake.message(CHAT, live.id).text, what="the final answer"
    )
    assert a.deleted == ["b.txt"] and b.deleted == [] and b.model.calls == []
    assert question.id == live.reply_to and fake.refused() == []
