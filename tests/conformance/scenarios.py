"""The rows of the conformance table (issue 41): what a person does and what they must see,
the same on every surface. Each row runs on every platform's driver; a surface that does
not do it yet is a known gap (``gaps``: an ``xfail(strict=True)`` with the plan's reason,
docs/plans/dispatcher.md §1), one that cannot by nature is skipped (``skips``).

Recorded as the product is before the dispatcher refactor: each slice that closes a gap
removes its entry here, and a gap closed without that fails the row (strict), so the table
in docs/conformance.md never lies.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from adapters import words
from adapters.recovery import INTERRUPTED
from adapters.room import BUSY
from core.scripted import Turn
from tests.conformance.driver import Driver, normalise
from tests.conformance.drivers import ACT

CALC: list[Turn | str] = [
    Turn("Thought: I will use the calculator.\nAction: calculate[17*23+4]", delay=0.02),
    Turn("Thought: I have it.\nFinal Answer: 17*23+4 = 395", delay=0.02),
]
STALLING: list[Turn | str] = [Turn("Thought: this takes a long while", chunk_size=4, stall_after=3)]
QUESTION = "What is 17*23+4?"
STOPPED = "Stopped by"


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[Driver], Awaitable[None]]
    turns: list[Turn | str]
    merge_window: float = 0.0
    """``agent.merge_window`` (0: no bursts)."""
    approval: bool = False
    """The bot asks a person before the surface's ``ACT`` action runs."""
    lease: float | None = None
    """``run_lease`` (None: the surface's default)."""
    room: int | None = None
    """The process's room (``agent.max_concurrent_runs``; None: the default)."""
    elsewhere: bool = False
    """The bot is enabled only in another place than the one the driver asks in."""
    gaps: dict[str, str] = field(default_factory=dict)
    """platform -> why it fails today (the row is ``xfail(strict=True)``)."""
    skips: dict[str, str] = field(default_factory=dict)
    """platform -> why it cannot apply there."""


async def ask_answer_trace(d: Driver) -> None:
    """A question is answered, and its run leaves a trace of the question."""
    asked = await d.ask("asker", QUESTION)
    assert "17*23+4 = 395" in await d.final_text(asked)
    await d.settled()
    (trace,) = await d.traces()
    assert (trace.question, trace.status) == (QUESTION, "answered")


async def stop_by_asker(d: Driver) -> None:
    asked = await d.ask("asker", "a slow one")
    await d.press_stop("asker", asked)
    assert STOPPED in await d.final_text(asked)


async def stop_by_admin(d: Driver) -> None:
    asked = await d.ask("asker", "a slow one")
    await d.press_stop("admin", asked)
    assert STOPPED in await d.final_text(asked)


async def stop_by_other_refused(d: Driver) -> None:
    """Someone else's Stop is refused, privately, in the shared words; the run goes on."""
    asked = await d.ask("asker", "a slow one")
    said = await d.press_stop("other", asked)
    assert said == normalise(words.stop_refused(d.named("asker")))
    await d.press_stop("asker", asked)  # still running: its own asker stops it
    assert STOPPED in await d.final_text(asked)


async def duplicate_delivery_once(d: Driver) -> None:
    """The platform delivers one question twice (a retry, a replay): one run answers it."""
    asked = await d.ask("asker", QUESTION)
    assert await d.redeliver(asked) == "", "the repeat is neither answered nor refused"
    assert "395" in await d.final_text(asked)
    await d.settled()
    assert len(d.model.calls) == 2, "one run of two model calls, not two runs"


async def burst_as_one(d: Driver) -> None:
    """Two messages in a row from one person within ``agent.merge_window``: one question."""
    first = await d.ask("asker", "What is 17*23")
    await d.ask("asker", "plus 4?")
    assert "395" in await d.final_text(first)
    await d.settled()
    assert len(d.model.calls) == 2, "one run of two model calls, not two runs"
    asked = str(d.model.calls[0].messages[-1]["content"])
    assert "What is 17*23" in asked and "plus 4?" in asked


async def reset(d: Driver) -> None:
    """An admin resets the place: the shared words, and its history is gone."""
    asked = await d.ask("asker", QUESTION)
    await d.final_text(asked)
    await d.settled()
    assert await d.history()
    assert await d.reset("admin") == normalise(words.RESET_DONE)
    assert await d.history() == []


async def reset_in_thread(d: Driver) -> None:
    """A question in the thread the bot answered in, then a reset there: the conversation
    that question went into is the one forgotten."""
    first = await d.ask("asker", QUESTION)
    await d.final_text(first)
    await d.settled()
    asked = await d.ask("asker", "and doubled?", where="thread")
    await d.final_text(asked)
    await d.settled()
    threaded = next(t for t in await d.traces() if t.question == "and doubled?")
    assert await d.history(threaded.conversation)
    assert await d.reset("admin", where="thread") == normalise(words.RESET_DONE)
    assert await d.history(threaded.conversation) == []


async def trace(d: Driver) -> None:
    """The place's last trace on demand: none yet in the shared words, then the question."""
    assert await d.trace("asker") == normalise(words.NO_TRACE)
    asked = await d.ask("asker", QUESTION)
    await d.final_text(asked)
    await d.settled()
    assert QUESTION in await d.trace("asker")


async def approve(d: Driver) -> None:
    """The asker approves the action the run waits on: it runs once, and the step says who."""
    asked = await d.ask("asker", "please do it")
    await d.decide("asker", asked, "approve")
    assert "Done." in await d.final_text(asked)
    assert len(d.ran()) == 1
    (trace,) = await d.traces()
    decided = trace.steps[0].approval
    assert decided is not None and decided.describe().startswith("✅ approved by")


async def edit(d: Driver) -> None:
    """The asker edits the action's input: it runs once, with the edited input."""
    asked = await d.ask("asker", "please do it")
    await d.decide("asker", asked, "edit")
    assert "Done." in await d.final_text(asked)
    (ran,) = d.ran()
    assert "edited" in str(ran)
    (trace,) = await d.traces()
    assert "edited" in trace.steps[0].action_input
    assert trace.steps[0].approval is not None


async def deny(d: Driver) -> None:
    """The asker denies it: it never runs, the model is told, the step says who."""
    asked = await d.ask("asker", "please do it")
    await d.decide("asker", asked, "deny")
    assert "Left alone." in await d.final_text(asked)
    assert d.ran() == []
    (trace,) = await d.traces()
    decided = trace.steps[0].approval
    assert decided is not None and decided.describe().startswith("🚫 denied by")


async def kill9_interrupted_then_retry_once(d: Driver) -> None:
    """A process dies mid-answer (kill -9): the next one finishes its message as interrupted
    with Retry; Retry asks the question again, once: a second press asks nothing."""
    left = await d.orphan(QUESTION)
    assert normalise(INTERRUPTED) in await d.orphan_finished(left)
    (trace,) = await d.traces()
    assert trace.status == "interrupted"
    await d.press_retry("asker", left)
    await d.settled()
    assert len(d.model.calls) == 1 and QUESTION in str(d.model.calls[0].messages[-1]["content"])
    answered = [t for t in await d.traces() if t.status == "answered"]
    assert len(answered) == 1 and answered[0].question == QUESTION
    said = await d.press_retry("other", left)  # pressed again, by anyone, after the answer
    await d.settled()
    assert said == normalise(words.RETRY_DONE)
    assert len(d.model.calls) == 1, "Retry asks once per interrupted run"


async def vote(d: Driver) -> None:
    """Anyone votes on a finished answer: the run's trace keeps the vote."""
    asked = await d.ask("asker", QUESTION)
    await d.final_text(asked)
    said = await d.vote("other", asked, "up")
    await d.settled()
    (trace,) = await d.traces()
    assert [v.value for v in trace.votes] == ["up"]
    assert said == normalise(words.vote_kept("up")), "only the voter hears back, in one wording"


async def settings_by_admin(d: Driver) -> None:
    """An admin changes what the place sees, and is told so in the shared words."""
    assert await d.settings("admin", "verbosity", "answer") == normalise(words.now_sees("answer"))


async def settings_by_other_refused(d: Driver) -> None:
    assert await d.settings("other", "verbosity", "answer") == normalise(words.ONLY_ADMINS)


PERSONA = "Answer in French, briefly."
CHOSEN: list[Turn | str] = ["Thought: I know.\nFinal Answer: Bien."]


async def choices_by_admin(d: Driver) -> None:
    """An admin sets the place's model, turns a tool off and sets its persona, each told so
    in the shared words; the next run here uses them."""
    assert await d.settings("admin", "model", "default") == normalise(words.model_set(None))
    off = normalise(words.tool_now("calculate", False))
    assert await d.settings("admin", "tools", "calculate") == off
    assert await d.settings("admin", "persona", PERSONA) == normalise(
        words.persona_set(len(PERSONA))
    )
    asked = await d.ask("admin", QUESTION)  # the web's place is the admin's own session
    assert "Bien." in await d.final_text(asked)
    await d.settled()
    system = d.model.calls[0].messages[0]["content"]
    assert PERSONA in system and "- calculate:" not in system


async def choices_by_other_refused(d: Driver) -> None:
    """Someone else may not change them: the same refusal for each, nothing changed."""
    for name, value in (("model", "default"), ("tools", "calculate"), ("persona", PERSONA)):
        assert await d.settings("other", name, value) == normalise(words.ONLY_ADMINS), name


HOSTILE_NAME = "<@U1ADA>@everyone`**x**`<b>\u202e"


async def choices_hostile(d: Driver) -> None:
    """What no catalogue or registry has, and a persona of 100k characters in any script
    with control characters: a clear, bounded reply each, naming nobody (no mention, no
    broadcast: the name is shown inert)."""
    said = await d.settings("admin", "model", HOSTILE_NAME)
    assert said.startswith(normalise(words.choice_refused("There is no model named")))
    assert "@" not in said and len(said) < 400
    said = await d.settings("admin", "tools", HOSTILE_NAME)
    assert said.startswith(normalise(words.choice_refused("There is no tool named")))
    assert "@" not in said and len(said) < 400
    huge = "Ωмир漢字🙂\x00\x07\u202e@everyone " * 5_000  # 100k characters
    said = await d.settings("admin", "persona", huge)
    if said != normalise(words.REQUEST_TOO_BIG):  # the web's transport refuses it first
        assert said.startswith(normalise(words.choice_refused("The persona is")))
        assert "the limit is 2,000" in said and len(said) < 200


async def usage(d: Driver) -> None:
    """Anyone may read what they have used today (``core.budgets``' words)."""
    asked = await d.ask("asker", QUESTION)
    await d.final_text(asked)
    await d.settled()
    assert "You have used" in await d.usage("asker")


async def busy_at_room_limit(d: Driver) -> None:
    """The process answers as many runs as its room holds: one more question, from anyone,
    is told so in the shared words (``adapters.room.BUSY``), and nothing runs for it."""
    first = await d.ask("asker", "a slow one")
    await d.running(first)
    second = await d.ask("other", QUESTION)
    assert await d.refusal(second) == normalise(BUSY)
    await d.press_stop("asker", first)
    assert STOPPED in await d.final_text(first)
    assert len(d.model.calls) == 1


async def asked_where_not_enabled(d: Driver) -> None:
    """Asked in a place the bot is not enabled in (its list names another): refused in the
    shared words (``adapters.dispatch.access``; a surface that can name places names the
    allowed ones after them), and no model call."""
    asked = await d.ask("asker", QUESTION)
    refused = await d.refusal(asked)
    before, _, after = normalise(words.not_here("PLACES")).partition("PLACES")
    named = refused.startswith(before) and refused.endswith(after)
    assert refused == normalise(words.not_here()) or named, refused
    await d.settled()
    assert d.model.calls == []


SCENARIOS = (
    Scenario("ask_answer_trace", ask_answer_trace, CALC),
    Scenario("stop_by_asker", stop_by_asker, STALLING),
    Scenario(
        "stop_by_admin",
        stop_by_admin,
        STALLING,
        skips={"web": "no admins on the web chat: a session is its own place (plan §1 admin)"},
    ),
    Scenario("stop_by_other_refused", stop_by_other_refused, STALLING),
    Scenario("approve", approve, [ACT, "Thought: done.\nFinal Answer: Done."], approval=True),
    Scenario("edit", edit, [ACT, "Thought: done.\nFinal Answer: Done."], approval=True),
    Scenario(
        "deny", deny, [ACT, "Thought: not allowed.\nFinal Answer: Left alone."], approval=True
    ),
    Scenario(
        "duplicate_delivery_once",
        duplicate_delivery_once,
        CALC * 2,
    ),
    Scenario(
        "burst_as_one",
        burst_as_one,
        CALC * 2,
        merge_window=0.6,
    ),
    Scenario(
        "kill9_interrupted_then_retry_once",
        kill9_interrupted_then_retry_once,
        [Turn("Thought: easy.\nFinal Answer: 17*23+4 = 395")] * 2,
        lease=1.0,
    ),
    Scenario("vote", vote, CALC),
    Scenario("settings_by_admin", settings_by_admin, []),
    Scenario(
        "settings_by_other_refused",
        settings_by_other_refused,
        [],
        skips={"web": "a web session is its own place: nobody else can reach its settings"},
    ),
    Scenario("choices_by_admin", choices_by_admin, CHOSEN),
    Scenario(
        "choices_by_other_refused",
        choices_by_other_refused,
        [],
        skips={"web": "a web session is its own place: nobody else can reach its settings"},
    ),
    Scenario("choices_hostile", choices_hostile, []),
    Scenario("usage", usage, CALC),
    Scenario("busy_at_room_limit", busy_at_room_limit, STALLING, room=1),
    Scenario(
        "asked_where_not_enabled",
        asked_where_not_enabled,
        [],
        elsewhere=True,
        skips={"web": "a web session is its own place: no access lists (plan §1 access)"},
    ),
    Scenario("reset", reset, CALC),
    Scenario(
        "reset_in_thread",
        reset_in_thread,
        CALC * 2,
        skips={"web": "a web session has no threads"},
    ),
    Scenario("trace", trace, CALC),
)
