"""The Discord driver: ``tests/integration/test_discord.py``'s ``running`` harness (the real
discord.py client against the fake gateway and REST API)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from adapters.room import Room
from core.history import InMemoryHistoryStore
from core.scripted import Turn
from core.stores import InMemoryRunRegistry, RunRecord, RunRegistry
from core.trace import Trace
from tests.conformance.driver import AskHandle, Persona, Said, Spot, normalise
from tests.fakes.discord_server import CHANNEL_ID, ROLE_ID, Call
from tests.integration.test_discord import Harness, content_of, running
from tests.integration.test_discord_approval import SAVE, bots

PEOPLE: dict[Persona, tuple[int, str, tuple[int, ...]]] = {
    "asker": (1001, "ada", ()),
    "other": (2002, "mallory", ()),
    "admin": (3003, "mod", (ROLE_ID,)),
}
NAMES = {str(uid): name for uid, name, _ in PEOPLE.values()}
CONVERSATION = f"discord:{CHANNEL_ID}"


class DiscordDriver:
    platform = "discord"

    def __init__(
        self, harness: Harness, ran: list[str] | None = None, runs: RunRegistry | None = None
    ) -> None:
        self.h = harness
        self.runs = runs or InMemoryRunRegistry()
        self.model = harness.model
        self._ran = ran if ran is not None else []

    async def orphan(self, question: str) -> AskHandle:
        run_id = "deadrun"
        stop = [{"type": 1, "components": [
            {"type": 2, "style": 4, "label": "Stop", "custom_id": f"reactbot:stop:{run_id}:1001"}
        ]}]  # fmt: skip
        body = {"content": "🤔 Thinking · step 1/8 · 3.0 s", "components": stop}
        left = self.h.fake._new_message(CHANNEL_ID, body, ())
        trace = Trace(question=question, conversation=CONVERSATION, id=run_id)
        where = {"channel": str(CHANNEL_ID), "message": str(left["id"])}
        dead = RunRecord(run_id, "Discord", CONVERSATION, "dead", where, trace=trace.to_json())
        await self.runs.beat([dead], at=time.time() - 600)
        return AskHandle("asker", question, int(left["id"]), {"run": run_id})

    async def orphan_finished(self, handle: AskHandle) -> str:
        def retry() -> bool:
            return any(":retry:" in i for i in _ids(self.h.fake.messages[handle.ref]))

        await self.h.fake.wait_for_call(lambda _: retry(), within=10.0)
        return normalise(str(self.h.fake.messages[handle.ref]["content"]), NAMES)

    async def press_retry(self, who: Persona, handle: AskHandle) -> Said:
        uid, name, roles = PEOPLE[who]
        custom_id = next(i for i in _ids(self.h.fake.messages[handle.ref]) if ":retry:" in i)
        press = self.h.fake.button_press(
            handle.ref, custom_id, author_id=uid, user_name=name, roles=roles
        )
        await self.h.fake.dispatch("INTERACTION_CREATE", press)
        return await self._answer(press)

    def ran(self) -> list[object]:
        return list(self._ran)

    async def decide(self, who: Persona, handle: AskHandle, verdict: str) -> Said:
        reply_id, custom_id = await self._reply_with(handle, f":{verdict}")
        uid, name, roles = PEOPLE[who]
        press = self.h.fake.button_press(
            reply_id, custom_id, author_id=uid, user_name=name, roles=roles
        )
        await self.h.fake.dispatch("INTERACTION_CREATE", press)
        callback = await self.h.fake.wait_for_call(
            lambda c: f"/interactions/{press['id']}/" in c.path, within=10.0
        )
        if callback.json.get("type") != 9:  # not a modal: what it said, if anything
            return await self._answer(press)
        modal = self.h.fake.modals[-1]
        reason = {"input": EDITED, "reason": ""} if verdict == "edit" else {"reason": "not now"}
        submit = self.h.fake.modal_submit(
            modal["custom_id"], reason, author_id=uid, user_name=name, roles=roles
        )
        await self.h.fake.dispatch("INTERACTION_CREATE", submit)
        return await self._answer(submit)

    async def _thread(self) -> int:
        """The thread the bot opened under its answer."""

        def threads() -> list[int]:
            return [
                cid
                for cid, c in self.h.fake.channels.items()
                if c.get("type") == 11 and c.get("parent_id") == str(CHANNEL_ID)
            ]

        await self.h.fake.wait_for_call(lambda _: bool(threads()), within=10.0)
        return threads()[0]

    async def ask(self, who: Persona, text: str, *, where: Spot = "channel") -> AskHandle:
        uid, name, roles = PEOPLE[who]
        channel = CHANNEL_ID if where == "channel" else await self._thread()
        payload = self.h.fake.message_create(
            text, author_id=uid, name=name, roles=roles, channel_id=channel
        )
        await self.h.fake.dispatch("MESSAGE_CREATE", payload)
        return AskHandle(who, text, payload)

    async def redeliver(self, handle: AskHandle) -> Said:
        await self.h.fake.dispatch("MESSAGE_CREATE", handle.ref)  # a gateway replay
        await self.final_text(handle)
        _answer, *more = self._replies(handle)  # anything besides the one answer
        return normalise(" ".join(str(m["content"]) for m in more), NAMES)

    def _replies(self, handle: AskHandle) -> list[dict[str, Any]]:
        asked = str(handle.ref["id"])
        return [
            m
            for m in self.h.fake.messages.values()
            if str((m.get("message_reference") or {}).get("message_id")) == asked
        ]

    def _reply(self, handle: AskHandle) -> dict[str, Any] | None:
        return next(iter(self._replies(handle)), None)

    async def _reply_with(self, handle: AskHandle, button: str) -> tuple[int, str]:
        def found(_: Call) -> bool:
            reply = self._reply(handle)
            return reply is not None and any(button in i for i in _ids(reply))

        await self.h.fake.wait_for_call(found, within=10.0)
        reply = self._reply(handle)
        assert reply is not None
        return int(reply["id"]), next(i for i in _ids(reply) if button in i)

    async def running(self, handle: AskHandle) -> None:
        await self._reply_with(handle, ":stop:")

    async def refusal(self, handle: AskHandle) -> Said:
        await self.h.fake.wait_for_call(lambda _: self._reply(handle) is not None, within=10.0)
        reply = self._reply(handle)
        assert reply is not None
        return normalise(str(reply["content"]), NAMES)

    async def press_stop(self, who: Persona, handle: AskHandle) -> Said:
        reply_id, custom_id = await self._reply_with(handle, ":stop:")
        uid, name, roles = PEOPLE[who]
        press = self.h.fake.button_press(
            reply_id, custom_id, author_id=uid, user_name=name, roles=roles
        )
        await self.h.fake.dispatch("INTERACTION_CREATE", press)
        return await self._answer(press)

    async def _answer(self, payload: dict[str, Any]) -> Said:
        """What the interaction ``payload`` was answered: its callback's text, or the
        first follow-up or original-response edit with text (files' names beside)."""
        iid, token = str(payload["id"]), str(payload["token"])

        def answers(call: Call) -> bool:
            if f"/interactions/{iid}/" in call.path:
                return True
            return token in call.path and call.method in ("POST", "PATCH")

        def said(call: Call) -> str:
            body = call.json if isinstance(call.json, dict) else {}
            text = content_of(call) or str((body.get("data") or {}).get("content") or "")
            return " ".join([text, *call.files]).strip()

        async def worded() -> Call:
            return await self.h.fake.wait_for_call(
                lambda c: answers(c) and bool(said(c)), within=10.0
            )

        callback = await self.h.fake.wait_for_call(answers, within=10.0)
        if said(callback) or callback.json.get("type") == 6:  # 6: a silent deferred update
            return normalise(said(callback), NAMES)
        return normalise(said(await worded()), NAMES)

    async def vote(self, who: Persona, handle: AskHandle, value: str) -> Said:
        reply_id, custom_id = await self._reply_with(handle, f":vote:{value}:")
        uid, name, roles = PEOPLE[who]
        press = self.h.fake.button_press(
            reply_id, custom_id, author_id=uid, user_name=name, roles=roles
        )
        await self.h.fake.dispatch("INTERACTION_CREATE", press)
        return await self._answer(press)

    async def settings(self, who: Persona, name: str, value: str) -> Said:
        if name == "persona":
            return await self._persona(who, value)
        option = {"verbosity": "level", "model": "name", "tools": "tool"}[name]
        return await self._command(who, "reactbot", {option: value}, subcommand=name)

    async def _persona(self, who: Persona, text: str) -> Said:
        """``/reactbot prompt``, then its form submitted with ``text`` (an admin's)."""
        uid, user_name, roles = PEOPLE[who]
        opened = self.h.fake.interaction_create(
            "reactbot", None, author_id=uid, user_name=user_name, roles=roles,
            subcommand="prompt", channel_id=CHANNEL_ID,
        )  # fmt: skip
        self.h.fake.remember_interaction(opened)
        await self.h.fake.dispatch("INTERACTION_CREATE", opened)
        callback = await self.h.fake.wait_for_call(
            lambda c: f"/interactions/{opened['id']}/" in c.path, within=10.0
        )
        if callback.json.get("type") != 9:  # 9: a modal; else refused
            return normalise(str((callback.json.get("data") or {}).get("content")), NAMES)
        submit = self.h.fake.modal_submit(
            "reactbot:persona", {"persona": text}, author_id=uid, user_name=user_name, roles=roles
        )
        self.h.fake.remember_interaction(submit)
        await self.h.fake.dispatch("INTERACTION_CREATE", submit)
        return await self._answer(submit)

    async def usage(self, who: Persona) -> Said:
        return await self._command(who, "reactbot", subcommand="usage")

    async def _command(
        self,
        who: Persona,
        name: str,
        options: dict[str, str] | None = None,
        *,
        subcommand: str | None = None,
        channel: int = CHANNEL_ID,
    ) -> Said:
        uid, user_name, roles = PEOPLE[who]
        payload = self.h.fake.interaction_create(
            name,
            options,
            author_id=uid,
            user_name=user_name,
            roles=roles,
            subcommand=subcommand,
            channel_id=channel,
        )
        self.h.fake.remember_interaction(payload)
        await self.h.fake.dispatch("INTERACTION_CREATE", payload)
        return await self._answer(payload)

    async def reset(self, who: Persona, *, where: Spot = "channel") -> Said:
        channel = CHANNEL_ID if where == "channel" else await self._thread()
        return await self._command(who, "reset", channel=channel)

    async def trace(self, who: Persona) -> Said:
        return await self._command(who, "trace")

    async def final_text(self, handle: AskHandle) -> str:
        await self.h.fake.wait_for_call(lambda _: self._reply(handle) is not None, within=10.0)
        await self.h.settled()
        reply = self._reply(handle)
        assert reply is not None
        return normalise(str(reply["content"]), NAMES)

    async def history(self, conversation: str | None = None) -> list[dict[str, Any]]:
        return list(await self.h.history.load(conversation or CONVERSATION))

    async def settled(self) -> None:
        await self.h.settled()

    async def traces(self) -> list[Trace]:
        return list(await self.h.traces.recent())

    def named(self, who: Persona) -> str | None:
        return f"@{PEOPLE[who][1]}"


def _ids(message: dict[str, Any]) -> list[str]:
    return [
        str(b.get("custom_id"))
        for row in message.get("components") or []
        for b in row.get("components") or []
    ]


ACT = SAVE
EDITED = "buy edited milk"


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
    if approval:  # test_discord_approval's harness: a broker, and a tool that needs it
        async with bots([turns], admin_roles=(ROLE_ID,), merge_window=merge_window) as b:
            (process,) = b.processes
            harness = Harness(
                b.fake, process.bot, process.model, InMemoryHistoryStore(), process.traces
            )
            yield DiscordDriver(harness, process.ran)
        return
    runs = InMemoryRunRegistry()
    leased: dict[str, Any] = {} if lease is None else {"run_lease": lease}
    if elsewhere:  # a channel of the guild, not the one the driver asks in
        leased["allowed_channels"] = (CHANNEL_ID + 7,)
    async with running(
        turns,
        admin_roles=(ROLE_ID,),
        merge_window=merge_window,
        runs=runs,
        room=None if room is None else Room(room),
        **leased,
    ) as h:
        yield DiscordDriver(h, runs=runs)
