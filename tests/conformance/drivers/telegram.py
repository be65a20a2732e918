"""The Telegram driver: ``tests/integration/test_telegram_bot.py``'s harness (the real
python-telegram-bot client, polling the strict fake), in a supergroup: the shared place
where Stop, reset and trace have more than one person to tell apart. Questions arrive
through the bot's webhook route (``adapters.telegram.webhook``), as Telegram posts them in
webhook mode, so that one can be delivered twice; presses and commands come by polling."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from adapters.room import Room
from adapters.telegram.render import VOTE_PREFIX, Button, TelegramPayload
from adapters.telegram.webhook import SECRET_HEADER, WebhookServer
from core.scripted import Turn
from core.stores import RunRecord
from core.trace import Trace
from tests.conformance.driver import AskHandle, Persona, Said, Spot, normalise
from tests.fakes.local_server import serve_locally
from tests.fakes.telegram_server import Message
from tests.integration.test_telegram_bot import (
    ALICE,
    BOB,
    DELETE,
    GROUP,
    Harness,
    _prompted,
    bots,
    ended,
)

ADMIN = BOB + 1
TOPIC = 77
HOOK_SECRET = "conformance-hook-secret"
PEOPLE: dict[Persona, int] = {"asker": ALICE, "other": BOB, "admin": ADMIN}


class TelegramDriver:
    platform = "telegram"

    def __init__(self, harness: Harness, hook: str, http: aiohttp.ClientSession) -> None:
        self.h = harness
        self.model = harness.model
        self._hook, self._http = hook, http

    async def _post(self, update: dict[str, Any]) -> None:
        """``update`` as Telegram posts it to the bot's webhook route."""
        headers = {SECRET_HEADER: HOOK_SECRET}
        async with self._http.post(self._hook, json=update, headers=headers) as response:
            assert response.status == 200, await response.text()

    async def orphan(self, question: str) -> AskHandle:
        run_id, conversation = "deadrun", f"telegram:{GROUP}"
        self.h.fake.chats.add(GROUP)  # a group the bot is in
        stop = Button("⏹ Stop", f"stop:{run_id}:{ALICE}")
        left = await self.h.bot.chat(GROUP).send(
            TelegramPayload("<b>🤔 Thinking · step 1/8</b>", (stop,))
        )
        trace = Trace(question=question, conversation=conversation, id=run_id)
        where = {"chat": str(GROUP), "message": str(left)}
        dead = RunRecord(run_id, "telegram", conversation, "dead", where, trace=trace.to_json())
        await self.h.stores.runs.beat([dead], at=time.time() - 600)
        return AskHandle("asker", question, left, {"run": run_id})

    async def orphan_finished(self, handle: AskHandle) -> str:
        def retry() -> bool:
            shown = self.h.fake.message(GROUP, handle.ref)
            return any(b["callback_data"].startswith("retry:") for b in shown.buttons)

        await self.h.fake.wait_for(retry, what="the orphan finished")
        return normalise(self.h.fake.message(GROUP, handle.ref).text)

    async def press_retry(self, who: Persona, handle: AskHandle) -> Said:
        shown = self.h.fake.message(GROUP, handle.ref)
        data = next(
            b["callback_data"] for b in shown.buttons if b["callback_data"].startswith("retry:")
        )
        query = self.h.fake.press(shown, data, user=PEOPLE[who])
        await self.h.fake.wait_for(lambda: query in self.h.fake.answered, what="the answer")
        await self.settled()
        return normalise(str(self.h.fake.answered[query].get("text") or ""))

    def ran(self) -> list[object]:
        return list(self.h.deleted)

    async def decide(self, who: Persona, handle: AskHandle, verdict: str) -> Said:
        def asking() -> Message | None:
            return next((m for m in self._replies(handle.ref) if len(m.buttons) > 1), None)

        await self.h.fake.wait_for(lambda: asking() is not None, what="the approval buttons")
        message = asking()
        assert message is not None
        prefix = {"approve": "ok:a:", "edit": "ok:e:"}.get(verdict, "ok:d:")
        data = next(
            b["callback_data"] for b in message.buttons if b["callback_data"].startswith(prefix)
        )
        query = self.h.fake.press(message, data, user=PEOPLE[who])
        await self.h.fake.wait_for(lambda: query in self.h.fake.answered, what="the answer")
        said = normalise(str(self.h.fake.answered[query].get("text") or ""))
        if verdict == "edit":  # the new input: a reply to the ForceReply prompt
            prompt = await _prompted(self.h, message, query, GROUP)
            self.h.fake.user_says(GROUP, EDITED, user=PEOPLE[who], reply_to=prompt)
        return said

    def _replies(self, to: Message) -> list[Message]:
        return [m for m in self.h.fake.bot_messages(GROUP) if m.reply_to == to.id]

    async def ask(self, who: Persona, text: str, *, where: Spot = "channel") -> AskHandle:
        topic = TOPIC if where == "thread" else None
        question = self.h.fake.user_says(GROUP, f"/ask {text}", user=PEOPLE[who], thread=topic)
        # Questions come through the webhook route (no await since user_says: getUpdates
        # never sees it), where a redelivery can be made as Telegram makes it.
        update = self.h.fake._updates.pop()
        await self._post(update)
        return AskHandle(who, text, question, {"update": update})

    async def redeliver(self, handle: AskHandle) -> Said:
        await self._post(handle.extra["update"])  # Telegram's retry: the same update_id
        await self.final_text(handle)
        _answer, *more = self._replies(handle.ref)  # anything besides the one answer
        return normalise(" ".join(m.text for m in more))

    def _live(self, handle: AskHandle) -> Message | None:
        return next((m for m in self._replies(handle.ref) if m.buttons and m.edits), None)

    async def running(self, handle: AskHandle) -> None:
        await self.h.fake.wait_for(lambda: self._live(handle) is not None, what="the live one")

    async def refusal(self, handle: AskHandle) -> Said:
        await self.h.fake.wait_for(lambda: bool(self._replies(handle.ref)), what="the refusal")
        return normalise(self._replies(handle.ref)[0].text)

    async def press_stop(self, who: Persona, handle: AskHandle) -> Said:
        await self.running(handle)
        message = self._live(handle)
        assert message is not None
        stop = next(
            b["callback_data"] for b in message.buttons if b["callback_data"].startswith("stop:")
        )
        query = self.h.fake.press(message, stop, user=PEOPLE[who])
        await self.h.fake.wait_for(lambda: query in self.h.fake.answered, what="the answer")
        return normalise(str(self.h.fake.answered[query].get("text") or ""))

    async def _command(self, who: Persona, command: str, *, topic: int | None = None) -> Said:
        sent = self.h.fake.user_says(GROUP, command, user=PEOPLE[who], thread=topic)
        await self.h.fake.wait_for(lambda: bool(self._replies(sent)), what="the reply")
        if self._replies(sent)[0].document is not None:  # a trace: its .md and .json
            await self.h.fake.wait_for(lambda: len(self._replies(sent)) >= 2, what="documents")
        parts = [m.text for m in self._replies(sent)]
        for m in self._replies(sent):
            if m.document is not None:
                name = m.document["file_name"]
                parts += [c.decode() for chat, n, c in self.h.fake.documents if n == name]
        return normalise(" ".join(p for p in parts if p))

    async def vote(self, who: Persona, handle: AskHandle, value: str) -> Said:
        await self.final_text(handle)
        (answer,) = [m for m in self._replies(handle.ref) if m.edits]
        data = next(
            b["callback_data"]
            for b in answer.buttons
            if b["callback_data"].startswith(f"{VOTE_PREFIX}{value}:")
        )
        query = self.h.fake.press(answer, data, user=PEOPLE[who])
        await self.h.fake.wait_for(lambda: query in self.h.fake.answered, what="the answer")
        return normalise(str(self.h.fake.answered[query].get("text") or ""))

    async def settings(self, who: Persona, name: str, value: str) -> Said:
        return await self._command(who, f"/{name} {value}")

    async def usage(self, who: Persona) -> Said:
        return await self._command(who, "/usage")

    async def reset(self, who: Persona, *, where: Spot = "channel") -> Said:
        return await self._command(who, "/reset", topic=TOPIC if where == "thread" else None)

    async def trace(self, who: Persona) -> Said:
        return await self._command(who, "/trace")

    async def final_text(self, handle: AskHandle) -> str:
        def final() -> Message | None:
            return next((m for m in self._replies(handle.ref) if ended(m)), None)

        await self.h.fake.wait_for(lambda: final() is not None, within=15.0, what="the answer")
        await self.settled()
        found = final()
        assert found is not None
        return normalise(found.text)

    async def history(self, conversation: str | None = None) -> list[dict[str, Any]]:
        return list(await self.h.stores.history.load(conversation or f"telegram:{GROUP}"))

    async def settled(self) -> None:
        await self.h.bot.answering.settled()

    async def traces(self) -> list[Trace]:
        return list(await self.h.stores.traces.recent())

    def named(self, who: Persona) -> str | None:
        return None  # "the person who asked"


ACT = DELETE[0]
EDITED = "edited.txt"


@contextlib.asynccontextmanager
async def driving(
    turns: list[Turn | str],
    *,
    merge_window: float = 0.0,
    approval: bool = False,
    lease: float | None = None,
    room: int | None = None,
    elsewhere: bool = False,
) -> AsyncIterator[Any]:
    leased: dict[str, Any] = {} if lease is None else {"run_lease": lease}
    if elsewhere:  # another group than the one the driver asks in
        leased["allowed_chats"] = frozenset({GROUP - 7})
    async with bots() as make, aiohttp.ClientSession() as http:
        harness = await make(
            list(turns),
            admins=frozenset({ADMIN}),
            merge_window=merge_window,
            approval=approval,
            room=None if room is None else Room(room),
            **leased,
        )
        server = WebhookServer(harness.bot, path="/telegram/hook", secret=HOOK_SECRET)
        runner, port = await serve_locally(server.application())
        try:
            yield TelegramDriver(harness, f"http://127.0.0.1:{port}/telegram/hook", http)
        finally:
            await runner.cleanup()
