"""Approve, edit, deny, allow here: one rule of who may decide (``agent.approval.approvers``
against the run's own record), from where (the run's own place), and the truth when there
is nothing left to decide.

::

    Decide(run_id, step, call, verdict, actor, at)
      -> approvals not set up -> NO_APPROVALS
      -> no request waits for that action (decided, timed out) -> DECISION_GONE
      -> no live process runs the run (its process died: finished now) -> NOT_RUNNING
      -> not one of the approvers -> decide_refused(approvers, the asker)
      -> an approver, pressed elsewhere than the run's place -> NOT_ITS_PLACE
      -> ``waiting``: the request (the surface opens its form for Edit… / Deny…)
      -> ``decide``: an edited input checked, the decision sent to the run's process,
         Done(ack=decided(verdict))
"""

from __future__ import annotations

from typing import Any

from adapters import words
from adapters.decisions import approver, in_place
from adapters.dispatch.handlers.ask import Answering
from adapters.dispatch.handlers.stop import Named, nobody, owner
from adapters.dispatch.intents import Decide
from adapters.dispatch.outcome import Done, Outcome, Refusal
from adapters.words import edit_problem
from core.approval import ApprovalRequest, Decision


async def waiting(
    intent: Decide, runs: Answering[Any], *, named: Named = nobody
) -> ApprovalRequest | Refusal:
    """The request ``intent``'s actor may decide on now, or why not."""
    broker = runs.broker
    if broker is None:
        return Refusal("gone", words.NO_APPROVALS)
    request = await broker.request(intent.key)
    if request is None:
        return Refusal("gone", words.DECISION_GONE)
    found = await owner(runs, intent.run_id)
    if found is None:
        return Refusal("gone", words.NOT_RUNNING)
    approvers = runs.policy.approvers
    if not approver(approvers, intent.press, found):
        asker = request.asker or found.asker
        return Refusal("who", words.decide_refused(approvers, named(asker) if asker else None))
    if not in_place(intent.press, found):
        return Refusal("elsewhere", words.NOT_ITS_PLACE)
    return request


async def decide(
    intent: Decide,
    runs: Answering[Any],
    *,
    named: Named = nobody,
    checked: ApprovalRequest | None = None,
) -> Outcome:
    """Decide; ``checked``: the request ``waiting`` gave for this intent a moment ago (a
    form opened and submitted since), not looked up again."""
    request = checked or await waiting(intent, runs, named=named)
    if isinstance(request, Refusal):
        return request
    if intent.verdict == "edit":
        edited = intent.input or ""
        if problem := edit_problem(edited, json_input=request.json_input):
            return Refusal("question", words.edit_refused(problem))
    actor = intent.actor
    decision = Decision(
        intent.verdict,
        actor.name,
        input=intent.input if intent.verdict == "edit" else None,
        reason=intent.reason.strip(),
        by_id=actor.id,
    )
    assert runs.broker is not None  # ``waiting`` found it
    await runs.broker.decide(intent.key, decision)
    return Done(ack=words.decided(intent.verdict, with_words=intent.written))
