"""The web chat driver: ``tests/integration/test_web_chat.py``'s harness (the aiohttp app
over real HTTP, a browser's session cookie and CSRF token, the live states over SSE).

A web session is its own place: the asker's session is also where its "admin" acts (the
web chat has no admins), and "other" is a second browser with a session of its own."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from adapters.room import Room
from adapters.web.chat import COOKIE
from core.scripted import Turn
from core.stores import RunRecord
from core.trace import Trace
from tests.conformance.driver import AskHandle, Persona, Said, Spot, normalise
from tests.integration.test_web_chat import DELETE, Chat, Events, _csrf, chats


class WebDriver:
    platform = "web"

    def __init__(self, chat: Chat, stream: Events, other: aiohttp.ClientSession, csrf: str):
        self.c = chat
        self.model = chat.model
        self.stream = stream
        self._other = (other, csrf)
        self._asked = 0
        self._sent: list[asyncio.Task[tuple[int | None, Said]]] = []
        """Every question's POST, answered or not yet."""

    async def _post(self, who: Persona, path: str, body: Any) -> tuple[int, Any]:
        http, csrf = (self.c.http, self.c.csrf) if who != "other" else self._other
        headers = {"X-CSRF-Token": csrf, "Origin": self.c.url}
        async with http.post(self.c.url + path, json=body, headers=headers) as response:
            if response.content_type != "application/json":
                return response.status, {"error": f"HTTP {response.status}"}
            return response.status, await response.json()

    async def ask(self, who: Persona, text: str, *, where: Spot = "channel") -> AskHandle:
        """As the page asks: the POST goes out with its own id, and the person may type the
        next message before it is answered (a burst waits out ``agent.merge_window``)."""
        body = {"question": text, "id": uuid.uuid4().hex}
        sent = asyncio.create_task(self._asked_by(who, body))
        self._sent.append(sent)
        return AskHandle(who, text, None, {"body": body, "sent": sent})

    async def _asked_by(self, who: Persona, body: dict[str, str]) -> tuple[int | None, Said]:
        """The run's place among those answered (None: refused, or gathered into another
        question), and what the page was told."""
        status, answer = await self._post(who, "/api/ask", body)
        if status != 202:  # refused: the page shows the error instead
            return None, normalise(str(answer.get("error", "")))
        if answer.get("dropped"):
            return None, ""
        self._asked += 1
        return self._asked - 1, ""

    async def _index(self, handle: AskHandle) -> int:
        index, _ = await handle.extra["sent"]
        assert index is not None, "it was not answered on its own"
        return int(index)

    async def running(self, handle: AskHandle) -> None:
        run = await self._run(handle)
        await self.stream.until(lambda d: d.get("run") == run and bool(d.get("steps")))

    async def refusal(self, handle: AskHandle) -> Said:
        index, said = await handle.extra["sent"]
        assert index is None, "it was answered"
        return str(said)

    async def redeliver(self, handle: AskHandle) -> Said:
        await handle.extra["sent"]
        _, body = await self._post(handle.who, "/api/ask", handle.extra["body"])
        return normalise(str(body.get("error", "")))  # a browser's retry of the same POST

    async def orphan(self, question: str) -> AskHandle:
        """What a process killed mid-answer leaves of a web answer: its run's record, naming
        the asker's session, silent for ten minutes (its live state died with it)."""
        session = self.c.chat.sessions.from_cookie(self._cookie(self.c.http))
        assert session is not None
        run_id, conversation = "deadrun", session.conversation
        trace = Trace(question=question, conversation=conversation, id=run_id)
        where = {"session": session.id}
        dead = RunRecord(run_id, "web", conversation, "dead", where, trace=trace.to_json())
        await self.c.chat.stores.runs.beat([dead], at=time.time() - 600)
        return AskHandle("asker", question, run_id)

    @staticmethod
    def _cookie(http: aiohttp.ClientSession) -> str:
        return next(c.value for c in http.cookie_jar if c.key == COOKIE)

    async def orphan_finished(self, handle: AskHandle) -> str:
        final = await self.stream.until(
            lambda d: d.get("run") == handle.ref and d.get("final") is True and d.get("retry")
        )
        return normalise(str(final.get("outcome", "")))

    async def press_retry(self, who: Persona, handle: AskHandle) -> Said:
        """A web session is its own place: only the asker's sees the Retry, so anyone's
        press is the asker's session's (another session's is refused:
        ``test_web_chat.py``)."""
        _, body = await self._post("asker", "/api/retry", {"run": handle.ref})
        return normalise(str(body.get("error", "")))

    def ran(self) -> list[object]:
        return list(self.c.ran)

    async def decide(self, who: Persona, handle: AskHandle, verdict: str) -> Said:
        run = await self._run(handle)
        waiting = await self.stream.until(lambda d: d.get("run") == run and d.get("pending"))
        pending = waiting["pending"]
        body = {"run": run, "step": pending["step"], "call": pending["call"], "verdict": verdict}
        if verdict == "deny":
            body["reason"] = "not now"
        if verdict == "edit":
            body["input"] = EDITED
        _, answer = await self._post(who, "/api/decide", body)
        return normalise(str(answer.get("error", "")))

    def _runs(self) -> list[str]:
        runs: list[str] = []
        for state in self.stream.seen:
            if state.get("run") and state["run"] not in runs:
                runs.append(state["run"])
        return runs

    async def _run(self, handle: AskHandle) -> str:
        index = await self._index(handle)
        await self.stream.until(lambda _: len(self._runs()) > index)
        return self._runs()[index]

    async def press_stop(self, who: Persona, handle: AskHandle) -> Said:
        await self.running(handle)
        _, body = await self._post(who, "/api/stop", {"run": await self._run(handle)})
        return normalise(str(body.get("error", "")))

    async def _command(self, who: Persona, path: str, body: dict[str, str]) -> Said:
        """What the page shows for a command: its ``said``, or the refusal's ``error``
        (and for a trace its Markdown too)."""
        _, answer = await self._post(who, path, body)
        shown = [str(answer.get("said") or answer.get("error") or "")]
        shown.append(str((answer.get("trace") or {}).get("markdown") or ""))
        return normalise(" ".join(shown))

    async def vote(self, who: Persona, handle: AskHandle, value: str) -> Said:
        """Only the session that asked sees its answer, so only it can vote on it: a vote
        from another session names a run of another conversation (refused, as elsewhere)."""
        del who
        run = await self._run(handle)
        return await self._command(handle.who, "/api/vote", {"run": run, "vote": value})

    async def settings(self, who: Persona, name: str, value: str) -> Said:
        field = {"tools": "tool"}.get(name, name)
        return await self._command(who, "/api/settings", {field: value})

    async def usage(self, who: Persona) -> Said:
        return await self._command(who, "/api/usage", {})

    async def reset(self, who: Persona, *, where: Spot = "channel") -> Said:
        return await self._command(who, "/api/reset", {})

    async def trace(self, who: Persona) -> Said:
        return await self._command(who, "/api/trace", {})

    async def final_text(self, handle: AskHandle) -> str:
        run = await self._run(handle)
        final = await self.stream.until(lambda d: d.get("run") == run and d.get("final") is True)
        await self.settled()
        parts = [(final.get("answer") or {}).get("text"), final.get("outcome"), final.get("footer")]
        return normalise(" ".join(str(p) for p in parts if p))

    async def history(self, conversation: str | None = None) -> list[dict[str, Any]]:
        return await self.c.history()

    async def settled(self) -> None:
        await asyncio.gather(*self._sent)  # every POST answered, then every run ended
        await self.c.chat.answering.settled()

    async def traces(self) -> list[Trace]:
        return list(await self.c.chat.stores.traces.recent())

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
    assert not elsewhere, "a web session is its own place: there is nowhere else to enable"
    async with (
        chats() as make,
        aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as other,
    ):
        leased = {} if lease is None else {"run_lease": lease}
        chat: Chat = await make(
            list(turns),
            merge_window=merge_window,
            approval=approval,
            room=None if room is None else Room(room),
            **leased,
        )
        async with other.get(chat.url + "/") as page:
            csrf = _csrf(await page.text())
        response = await chat.http.get(chat.url + "/api/events")
        assert response.status == 200
        driver = WebDriver(chat, Events(response), other, csrf)
        try:
            yield driver
        finally:
            for sent in driver._sent:
                sent.cancel()
            await asyncio.gather(*driver._sent, return_exceptions=True)
            response.close()
