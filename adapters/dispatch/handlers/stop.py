"""Stop, on every surface: one rule of who may (the person who asked, or an admin), from
where (the run's own place), checked against the run's own record wherever it runs, and
one set of words for each answer.

::

    Stop(run_id, actor, at)
      -> the run's record: none, or its process died (taken and finished now) -> NOT_RUNNING
      -> neither its asker nor an admin -> stop_refused(the asker, as the surface names them)
      -> theirs, but pressed elsewhere than the run's place (a forged or replayed button)
         -> NOT_ITS_PLACE: it acts only on the run of its own place
      -> stopped here, or at the process running it -> Done(ack=STOPPING)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapters import words
from adapters.decisions import Owner, asker_or_admin, in_place
from adapters.dispatch.handlers.ask import Answering
from adapters.dispatch.intents import Stop
from adapters.dispatch.outcome import Done, Outcome, Refusal

Named = Callable[[str], str | None]
"""How a surface shows a person in a refusal (a mention: ``<@1001>``), from their id; None
says "the person who asked"."""


def nobody(user: str) -> str | None:
    del user
    return None


async def owner(runs: Answering[Any], run_id: str) -> Owner | None:
    """The run's own word on who asked it and where; None when no live process runs it (a
    dead process's run is taken and finished now, as the next sweep would)."""
    if await runs.recovery.left_by_the_dead(run_id):
        return None
    return await runs.owner(run_id)


async def stop(intent: Stop, runs: Answering[Any], *, named: Named = nobody) -> Outcome:
    found = await owner(runs, intent.run_id)
    if found is None:
        return Refusal("gone", words.NOT_RUNNING)
    if not asker_or_admin(intent.press, found):
        return Refusal("who", words.stop_refused(named(found.asker) if found.asker else None))
    if not in_place(intent.press, found):  # theirs, pressed elsewhere: a forged button
        return Refusal("elsewhere", words.NOT_ITS_PLACE)
    actor = intent.actor
    if not await runs.stop(intent.run_id, by=actor.name, by_id=actor.id):
        return Refusal("gone", words.NOT_RUNNING)
    return Done(ack=words.STOPPING)
