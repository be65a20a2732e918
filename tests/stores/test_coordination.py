"""Conformance: what processes agree on (event claims, cooldowns, channel settings, run
slots, the runs in flight, token usage, rate budgets), the same on every backend."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import asdict, replace

from core.stores import RunRecord
from core.trace import Trace, TraceStep
from tests.stores import DAY_END, check_budget_holds
from tests.stores.conformance import SHORT, Backend


class TestClaims:
    async def test_an_event_is_claimed_once_however_many_race_for_it(
        self, backend: Backend
    ) -> None:
        claims = (backend.here.claims, backend.there.claims)
        won = await asyncio.gather(*(claims[i % 2].claim("e1") for i in range(20)))
        assert won.count(True) == 1
        assert await backend.here.claims.claim("e2"), "another event is another claim"

    async def test_a_claim_lasts_its_own_ttl(self, backend: Backend) -> None:
        assert await backend.here.claims.claim("short", ttl=SHORT)
        assert await backend.here.claims.claim("long")  # the store's TTL: minutes
        assert await backend.here.claims.claim("minute", ttl=60)
        assert not await backend.there.claims.claim("minute", ttl=60)
        await backend.advance(SHORT + 0.1)
        assert not await backend.there.claims.claim("long")
        assert not await backend.there.claims.claim("minute")
        assert await backend.there.claims.claim("short", ttl=SHORT), "lapsed: claimed anew"

    async def test_a_released_claim_can_be_taken_again_once(self, backend: Backend) -> None:
        assert await backend.here.claims.claim("e")
        await backend.here.claims.release("e")
        won = await asyncio.gather(backend.there.claims.claim("e"), backend.here.claims.claim("e"))
        assert sorted(won) == [False, True]
        await backend.there.claims.release("never-claimed")  # nothing to release: no error


class TestCooldowns:
    async def test_a_window_is_shared_and_not_extended_by_a_refusal(self, backend: Backend) -> None:
        assert await backend.here.cooldowns.hit("u1", 30.0) == 0.0
        left = await backend.there.cooldowns.hit("u1", 30.0)
        assert 20.0 < left <= 30.0  # what is left of the first window (a loaded runner is slow)
        assert await backend.there.cooldowns.hit("u2", 30.0) == 0.0, "windows are per key"

    async def test_the_window_ends_and_a_new_one_starts(self, backend: Backend) -> None:
        assert await backend.here.cooldowns.hit("k", SHORT) == 0.0
        await backend.advance(SHORT + 0.1)
        assert await backend.there.cooldowns.hit("k", 60) == 0.0
        assert 59 < await backend.here.cooldowns.hit("k", 60) <= 60

    async def test_zero_seconds_is_no_cooldown(self, backend: Backend) -> None:
        assert await backend.here.cooldowns.hit("k", 0) == 0.0
        assert await backend.here.cooldowns.hit("k", 0) == 0.0
        assert await backend.here.cooldowns.hit("k", 5.0) == 0.0, "no window was started"


class TestChannelSettings:
    async def test_a_setting_is_shared_and_none_goes_back_to_the_default(
        self, backend: Backend
    ) -> None:
        settings = backend.here.channel_settings
        assert await settings.get("C1") == {}
        await settings.put("C1", "verbosity", "compact")
        await settings.put("C1", "persona", "Terse ☃, cites sources.")
        await settings.put("C2", "model", "gpt-4o")
        assert await backend.there.channel_settings.get("C1") == {
            "verbosity": "compact",
            "persona": "Terse ☃, cites sources.",
        }
        await backend.there.channel_settings.put("C1", "verbosity", None)
        assert await settings.get("C1") == {"persona": "Terse ☃, cites sources."}
        assert await settings.get("C2") == {"model": "gpt-4o"}


class TestRunSlots:
    async def test_a_burst_from_every_process_gets_exactly_the_limit(
        self, backend: Backend
    ) -> None:
        slots = (backend.here.slots, backend.there.slots)
        taken = await asyncio.gather(
            *(slots[i % 2].take("ada", f"r{i}", limit=3, lease=60) for i in range(12))
        )
        assert taken.count(True) == 3

    async def test_a_slot_given_back_frees_room_and_one_held_is_taken_again(
        self, backend: Backend
    ) -> None:
        slots = backend.here.slots
        assert await slots.take("ada", "a", limit=2, lease=60)
        assert await backend.there.slots.take("ada", "b", limit=2, lease=60)
        assert not await slots.take("ada", "c", limit=2, lease=60)
        assert await slots.take("ada", "a", limit=2, lease=60), "its own slot, renewed"
        assert await slots.take("bob", "c", limit=2, lease=60), "slots are per key"
        await backend.there.slots.give_back("ada", "a")
        assert await slots.take("ada", "c", limit=2, lease=60)

    async def test_a_lapsed_lease_frees_its_room_and_does_not_cut_a_longer_one(
        self, backend: Backend
    ) -> None:
        """The process holding "short" died: nobody renewed it."""
        assert await backend.here.slots.take("ada", "long", limit=2, lease=60)
        assert await backend.there.slots.take("ada", "short", limit=2, lease=SHORT)
        await backend.advance(SHORT + 0.1)
        assert await backend.here.slots.take("ada", "next", limit=2, lease=60), "short lapsed"
        assert not await backend.there.slots.take("ada", "more", limit=2, lease=60), "long held"


def record(run_id: str, *, surface: str = "Slack", owner: str = "p1") -> RunRecord:
    return RunRecord(run_id, surface, f"conv-{run_id}", owner, {"channel": "C1", "ts": "1.0"})


class TestRunRegistry:
    async def test_a_silent_run_is_an_orphan_and_a_beating_one_is_not(
        self, backend: Backend
    ) -> None:
        registry = backend.here.runs
        await registry.beat([record("a"), record("b"), record("c", surface="Discord")], at=100.0)
        await backend.there.runs.beat([record("b")], at=200.0)
        assert await registry.orphans("Slack", silent_since=150.0) == ["a"]
        assert await registry.orphans("Discord", silent_since=150.0) == ["c"]
        assert await registry.running("Slack", "b") and not await registry.running("Slack", "c")
        assert (await registry.count("Slack"), await registry.count("Discord")) == (2, 1)
        await backend.there.runs.end("Slack", "a")
        assert await registry.orphans("Slack", silent_since=150.0) == []
        assert not await registry.running("Slack", "a")
        assert await registry.count("Slack") == 1

    async def test_a_record_names_who_asked_and_where_for_any_process(
        self, backend: Backend
    ) -> None:
        asked = RunRecord("r", "Slack", "conv-r", "p1", {"channel": "C1"}, asker="U1", trace="{}")
        await backend.here.runs.beat([asked], at=1.0)
        assert await backend.there.runs.get("Slack", "r") == asked
        assert await backend.there.runs.record("Slack", "r") == asked, "by its earlier name"
        assert await backend.there.runs.get("Discord", "r") is None, "surfaces are apart"
        await backend.here.runs.end("Slack", "r")
        assert await backend.there.runs.get("Slack", "r") is None

    async def test_exactly_one_claim_wins(self, backend: Backend) -> None:
        await backend.here.runs.beat([record("x")], at=1.0)
        registries = (backend.here.runs, backend.there.runs)
        claims = await asyncio.gather(*(registries[i % 2].claim("Slack", "x") for i in range(20)))
        won = [c for c in claims if c is not None]
        assert len(won) == 1 and won[0] == record("x")
        assert await backend.here.runs.claim("Slack", "x") is None
        assert not await backend.here.runs.running("Slack", "x")

    async def test_steps_added_since_the_record_come_with_its_claim(self, backend: Backend) -> None:
        registry = backend.here.runs
        trace = Trace(question="q", id="s", conversation="conv-s")
        trace.steps.append(TraceStep(1, action="a", observation="1"))
        await registry.beat([replace(record("s"), trace=trace.to_json())], at=1.0)
        steps = [json.dumps(asdict(TraceStep(n, action="b", observation=str(n)))) for n in (2, 3)]
        assert await registry.update("Slack", "s", steps=steps[:1], at=2.0)
        head = replace(trace, steps=[], notices=["late"]).to_json()
        assert await registry.update(
            "Slack", "s", steps=steps[1:], record=replace(record("s"), trace=head), at=3.0
        )
        assert await registry.orphans("Slack", silent_since=2.5) == []
        claimed = await backend.there.runs.claim("Slack", "s")
        assert claimed is not None
        left = Trace.from_json(claimed.trace)
        assert [s.index for s in left.steps] == [2, 3] and left.notices == ["late"]
        assert not await registry.update("Slack", "s", steps=steps, at=4.0), "claimed: gone"
        assert not await registry.running("Slack", "s")


class TestUsageCounters:
    async def test_counts_add_up_across_processes(self, backend: Backend) -> None:
        day = uuid.uuid4().hex
        assert await backend.here.usage.add(f"{day}:ada", 5, expire_at=DAY_END) == 5
        assert await backend.there.usage.add(f"{day}:ada", 7, expire_at=DAY_END) == 12
        assert await backend.here.usage.get([f"{day}:ada", f"{day}:bob"]) == [12, 0]

    async def test_holds_keep_the_reservation_rule(self, backend: Backend) -> None:
        await check_budget_holds(backend.here.usage, backend.advance, day=uuid.uuid4().hex)


class TestRateBudget:
    async def test_replicas_take_from_one_budget_and_the_reserve_stays_unspent(
        self, backend: Backend
    ) -> None:
        a, b = backend.budgets(3, 60.0)
        assert await a.take(0) == 0.0 and await b.take(0) == 0.0
        assert await a.take(1) > 0, "the reserve stays unspent"
        assert await b.take(0) == 0.0
        assert await a.take(0) > 0, "three in flight between both replicas fill it"
        await a.done()
        assert 59.0 < await b.take(0) <= 60.0, "an answered request counts `per` after it"

    async def test_requests_stop_counting_per_after_their_answer(self, backend: Backend) -> None:
        a, b = backend.budgets(1, SHORT)
        assert await a.take(0) == 0.0
        await a.done()
        await backend.advance(SHORT + 0.1)
        assert await b.take(0) == 0.0
        assert await a.take(0) > 0, "b's request counts now"

    async def test_charged_requests_count_at_once(self, backend: Backend) -> None:
        a, b = backend.budgets(3, 60.0)
        await a.charge(2)
        assert await b.take(0) == 0.0
        assert await a.take(0) > 0
