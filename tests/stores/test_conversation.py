"""Conformance: what belongs to one conversation (history, locks, files, allowances), the
same on every backend (``conformance.BACKENDS``)."""

from __future__ import annotations

import asyncio

from core.llm import Message
from core.tools.lookup import Passage
from tests.stores.conformance import Backend


def turn(i: int) -> list[Message]:
    return [{"role": "user", "content": f"q{i} ☃"}, {"role": "assistant", "content": f"a{i}"}]


class TestHistory:
    async def test_appended_turns_load_back_in_order_per_conversation(
        self, backend: Backend
    ) -> None:
        history = backend.here.history
        await history.append("c1", *turn(1))
        await history.append("c1", *turn(2))
        await history.append("c2", *turn(9))
        assert await backend.there.history.load("c1") == [*turn(1), *turn(2)]
        assert await backend.there.history.load("c2") == turn(9)
        assert await history.load("nobody") == []

    async def test_only_the_last_turns_are_kept(self, backend: Backend) -> None:
        for i in range(13):  # the bundle keeps 10 turns
            await backend.here.history.append("c", *turn(i))
        assert await backend.there.history.load("c") == [m for i in range(3, 13) for m in turn(i)]

    async def test_clear_forgets_one_conversation(self, backend: Backend) -> None:
        await backend.here.history.append("c1", *turn(1))
        await backend.here.history.append("c2", *turn(2))
        await backend.there.history.clear("c1")
        assert await backend.here.history.load("c1") == []
        assert await backend.here.history.load("c2") == turn(2)


class TestLocks:
    async def test_one_conversation_runs_one_at_a_time_and_the_waiter_hears_it_once(
        self, backend: Backend
    ) -> None:
        order: list[str] = []
        waits: list[str] = []
        inside, waiting, leave = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def first() -> None:
            async with backend.here.locks.hold("c"):
                order.append("first in")
                inside.set()
                await leave.wait()
                order.append("first out")

        def on_wait() -> None:
            waits.append("second")
            waiting.set()

        async def second() -> None:
            async with backend.there.locks.hold("c", on_wait=on_wait):
                order.append("second in")

        async with asyncio.timeout(5):
            holder = asyncio.create_task(first())
            await inside.wait()
            waiter = asyncio.create_task(second())
            await waiting.wait()
            assert order == ["first in"], "the second run waits while the first holds"
            leave.set()
            await asyncio.gather(holder, waiter)
        assert order == ["first in", "first out", "second in"]
        assert waits == ["second"]

    async def test_other_conversations_do_not_wait(self, backend: Backend) -> None:
        waits: list[str] = []
        async with (
            asyncio.timeout(5),
            backend.here.locks.hold("a"),
            backend.there.locks.hold("b", on_wait=lambda: waits.append("b")),
        ):
            pass
        assert waits == []

    async def test_a_failing_run_releases_its_lock(self, backend: Backend) -> None:
        class Failed(Exception):
            pass

        try:
            async with backend.here.locks.hold("c"):
                raise Failed
        except Failed:
            pass
        waits: list[str] = []
        async with (
            asyncio.timeout(5),
            backend.there.locks.hold("c", on_wait=lambda: waits.append("x")),
        ):
            pass
        assert waits == []


class TestFiles:
    async def test_passages_are_kept_per_conversation_until_cleared(self, backend: Backend) -> None:
        first = [Passage("report.pdf", ("page 1",), "Revenue ☃ grew."), Passage("a.md", (), "x")]
        later = [Passage("notes.txt", ("Intro", "Scope"), "More.")]
        await backend.here.files.add("c1", first)
        await backend.there.files.add("c1", later)
        await backend.here.files.add("c1", [])  # nothing to add: nothing changes
        assert await backend.there.files.load("c1") == [*first, *later]
        assert await backend.here.files.load("c2") == []
        await backend.there.files.clear("c1")
        assert await backend.here.files.load("c1") == []


class TestAllowances:
    async def test_an_allowance_holds_for_its_conversation_and_any_spelling(
        self, backend: Backend
    ) -> None:
        assert await backend.here.allowances.allowed("c1", "save_note") is None
        await backend.here.allowances.allow("c1", "Save_Note", by="ada")
        assert await backend.there.allowances.allowed("c1", "save_note") == "ada"
        assert await backend.there.allowances.allowed("c1", "SAVE_NOTE") == "ada"
        assert await backend.there.allowances.allowed("c2", "save_note") is None
        await backend.there.allowances.allow("c1", "save_note", by="bob")
        assert await backend.here.allowances.allowed("c1", "save_note") == "bob", "the latest"
