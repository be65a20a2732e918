"""core.fair.FairSlots: one place per owner at a time, the least recently served first, and a
cancelled waiter never keeps a place; ordered by events, never by time."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

import pytest

from core.fair import FairSlots


class Holder:
    """A task holding a place of ``slots`` for ``owner`` until ``release`` is set."""

    def __init__(self, slots: FairSlots, owner: Hashable, said: list[bool] | None = None) -> None:
        self.got = asyncio.Event()
        self.release = asyncio.Event()
        on_queue = said.append if said is not None else None
        self.task = asyncio.create_task(self._hold(slots, owner, on_queue))

    async def _hold(self, slots: FairSlots, owner: Hashable, on_queue: object) -> None:
        async with slots.hold(owner, on_queue=on_queue):  # type: ignore[arg-type]
            self.got.set()
            await self.release.wait()

    async def done(self) -> None:
        self.release.set()
        await self.task


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_persons_second_file_waits_for_the_first_though_a_place_is_free() -> None:
    slots = FairSlots(2)
    first, second = Holder(slots, "ada"), Holder(slots, "ada")
    await settle()
    assert first.got.is_set() and not second.got.is_set()
    other = Holder(slots, "bob")
    await settle()
    assert other.got.is_set(), "another person takes the free place"
    await first.done()
    await settle()
    assert second.got.is_set()
    await second.done()
    await other.done()
    assert slots.turns == ["ada", "bob", "ada"]


async def test_other_people_go_between_one_persons_queued_files() -> None:
    slots = FairSlots(1)
    ada = [Holder(slots, "ada") for _ in range(3)]
    await settle()
    bob = [Holder(slots, "bob") for _ in range(2)]
    cyd = Holder(slots, "cyd")
    await settle()
    # cyd, never served, goes before anyone's second; then ada and bob take turns.
    for holder in [ada[0], bob[0], cyd, ada[1], bob[1], ada[2]]:
        await settle()
        assert holder.got.is_set()
        await holder.done()
    assert slots.turns == ["ada", "bob", "cyd", "ada", "bob", "ada"]


async def test_six_people_at_once_are_served_in_the_order_they_came() -> None:
    slots = FairSlots(2)
    holders = [Holder(slots, f"p{n}") for n in range(6)]
    await settle()
    assert [h.got.is_set() for h in holders] == [True, True] + [False] * 4
    assert slots.waiting == 4
    for pair in (holders[:2], holders[2:4], holders[4:]):
        await settle()
        assert all(h.got.is_set() for h in pair)
        for holder in pair:
            await holder.done()
    assert slots.turns == [f"p{n}" for n in range(6)]
    assert slots.waiting == 0 and not slots._turn_began, "nothing kept for gone owners"


async def test_a_waiter_is_told_it_waits_and_when_its_turn_comes() -> None:
    slots = FairSlots(1, notice_after=0)
    said_first: list[bool] = []
    said_second: list[bool] = []
    first = Holder(slots, "ada", said_first)
    second = Holder(slots, "bob", said_second)
    await settle()
    assert said_first == [], "a file read at once is not said to wait"
    assert said_second == [True]
    await first.done()
    await settle()
    assert said_second == [True, False]
    await second.done()


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    slots = FairSlots(1)
    first, gone, last = Holder(slots, "ada"), Holder(slots, "bob"), Holder(slots, "cyd")
    await settle()
    gone.task.cancel()  # a Stop while its file waits
    with pytest.raises(asyncio.CancelledError):
        await gone.task
    assert slots.waiting == 1
    await first.done()
    await settle()
    assert last.got.is_set()
    await last.done()
    assert slots.turns == ["ada", "cyd"]


async def test_a_place_granted_as_its_waiter_is_cancelled_goes_on() -> None:
    slots = FairSlots(1)
    first, granted, last = Holder(slots, "ada"), Holder(slots, "bob"), Holder(slots, "cyd")
    await settle()
    first.release.set()
    await first.task  # bob's place is granted; bob's task has not run yet
    granted.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await granted.task
    await settle()
    assert last.got.is_set(), "the place went on to the next"
    await last.done()


async def test_a_waiter_cancelled_before_a_place_frees_is_skipped() -> None:
    slots = FairSlots(1)
    first, gone, last = Holder(slots, "ada"), Holder(slots, "bob"), Holder(slots, "cyd")
    await settle()
    gone.task.cancel()  # its future is cancelled now; its task leaves the queue later
    first.release.set()
    await first.task
    with pytest.raises(asyncio.CancelledError):
        await gone.task
    await settle()
    assert last.got.is_set()
    await last.done()


async def test_no_owner_is_an_owner_of_its_own() -> None:
    slots = FairSlots(2)
    one, two = Holder(slots, None), Holder(slots, None)
    await settle()
    assert one.got.is_set() and two.got.is_set()
    await one.done()
    await two.done()


def test_at_least_one_place() -> None:
    with pytest.raises(ValueError, match="places"):
        FairSlots(0)
