"""Conformance: messages between processes (stop requests, decisions) and the approval
requests waiting for one, the same on every backend."""

from __future__ import annotations

import asyncio

from core.stores import ApprovalRequest, Decision, RequestKey
from tests.stores.conformance import Backend, heard


class TestStops:
    async def test_a_request_reaches_the_subscriber_of_any_process_once(
        self, backend: Backend
    ) -> None:
        got: list[tuple[str, str, str]] = []
        second = asyncio.Event()

        def handler(run_id: str, by: str, by_id: str) -> None:
            got.append((run_id, by, by_id))
            if run_id == "run2":
                second.set()

        async with backend.there.stops.subscribe(handler):
            await backend.here.stops.request("run1", by="Ada ☃", by_id="U1")
            await backend.here.stops.request("run2", by="bob")
            await heard(second)
        assert got == [("run1", "Ada ☃", "U1"), ("run2", "bob", "")]

    async def test_a_failing_subscriber_does_not_stop_the_others(self, backend: Backend) -> None:
        got: list[str] = []
        done = asyncio.Event()

        def failing(run_id: str, by: str, by_id: str) -> None:
            raise RuntimeError("a bug in one handler")

        def working(run_id: str, by: str, by_id: str) -> None:
            got.append(run_id)
            done.set()

        async with backend.there.stops.subscribe(failing), backend.there.stops.subscribe(working):
            await backend.here.stops.request("run1", by="ada")
            await heard(done)
        assert got == ["run1"]


class TestDecisions:
    async def test_a_decision_reaches_the_subscriber_of_any_process(self, backend: Backend) -> None:
        got: list[tuple[RequestKey, Decision]] = []
        done = asyncio.Event()

        def handler(key: RequestKey, decision: Decision) -> None:
            got.append((key, decision))
            done.set()

        edit = Decision("edit", "bob", input='{"q": "☃"}', reason="too broad", by_id="U2")
        async with backend.there.decisions.subscribe(handler):
            await backend.here.decisions.publish(("run1", 2, 0), edit)
            await heard(done)
        assert got == [(("run1", 2, 0), edit)]


def request(run_id: str = "run9") -> ApprovalRequest:
    return ApprovalRequest(
        run_id, "c", "ada", 2, 0, "t", "save_note", "x☃" * 3000, False, 5.0, True
    )


class TestPending:
    async def test_a_waiting_request_is_readable_by_any_process_until_its_owner_drops_it(
        self, backend: Backend
    ) -> None:
        await backend.here.pending.put(request())
        assert await backend.there.pending.get(("run9", 2, 0)) == request()
        assert await backend.there.pending.get(("run9", 2, 1)) is None, "another call"
        await backend.here.pending.drop(("run9", 2, 0))  # by the process whose run waits
        assert await backend.there.pending.get(("run9", 2, 0)) is None
        await backend.here.pending.drop(("run9", 2, 0))  # dropped twice: no error
