"""What happens to an action once the model chose it, beside the loop: a person's approval
(``Approvals``) and the tool's run (``Tools``), each ending in an ``Outcome``, the text the
model reads as its Observation. Tool faults are outcomes, never raised: the loop goes on."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from core.approval import Allowances, ApprovalRequest, Approver, Decision
from core.errors import StoreUnavailable, ToolError
from core.events import ApprovalDecided, ApprovalOutcome, ApprovalRequested
from core.modes import ToolCall
from core.observe import Probes
from core.outbox import Outbox
from core.parser import Action
from core.tools import Attachment, Tool, ToolRegistry, ToolResult, needs_approval
from core.tools.schema import parameters_of, tool_input
from core.trace import ApprovalRecord, Trace, TraceStep

log = logging.getLogger(__name__)

REPEAT_NOTE = (
    "Note: this is the same action with the same input as your previous step, so it "
    "gives no new information. Use a different input, another tool, or finish.\n"
)
"""Put before the Observation of an action that repeats the previous step's."""


@dataclass(slots=True)
class Outcome:
    """What running one action gave: the Observation and how long it took."""

    text: str
    error: bool
    sources: tuple[str, ...] = ()
    seconds: float = 0.0
    attachments: tuple[Attachment, ...] = ()


class Tools:
    """Runs the run's tools; whatever goes wrong becomes text the model can act on."""

    def __init__(
        self,
        tools: ToolRegistry,
        *,
        timeout: float,
        clock: Callable[[], float],
        probes: Probes | None,
    ) -> None:
        self.tools = tools
        self.timeout = timeout
        self._clock = clock
        self._probes = probes

    def native_action(self, call: ToolCall) -> tuple[Action, Outcome | None]:
        """The Action a native call stands for, its input as ``Tool.run`` takes it (the
        string itself for a one-string tool, so the trace reads as in text mode); with an
        Observation already decided when the call cannot run as written."""
        name = call.name.strip()
        tool = self.tools.get(name)
        if tool is None:
            return Action(name, call.arguments), None  # run() names the real tools
        try:
            return Action(tool.name, tool_input(tool, call.arguments, native=True)), None
        except ToolError as exc:
            return Action(tool.name, call.arguments), Outcome(f"Error: {exc}", True)

    def text_action(self, action: Action) -> Action:
        """The Action a parsed step stands for: a one-string tool given a JSON object with
        one string (``{"query": "x"}``, as models write a JSON tool call) takes the string,
        and the trace reads as the tool sees it; any other input is kept as written."""
        tool = self.tools.get(action.name)
        if tool is None or parameters_of(tool) is not None:
            return action
        only = _only_string(action.input)
        return action if only is None else Action(action.name, only)

    async def run(
        self,
        action: Action,
        n: int,
        *,
        repeated: bool,
        call_id: str | None = None,
    ) -> Outcome:
        """Runs one tool; ``repeated``: the previous step took this very action."""
        started = self._clock()
        if self._probes is None:
            outcome = await self._outcome(action)
        else:
            tool = self.tools.get(action.name)
            description = tool.description if tool is not None else ""
            probe = self._probes.tool_call(n, call_id, action.name, action.input, description)
            try:
                outcome = await self._outcome(action)
            except BaseException:  # the run was stopped (tool errors are outcomes)
                probe.end("cancelled", True)
                raise
            probe.end(outcome.text, outcome.error)
        if repeated:
            outcome.text = REPEAT_NOTE + outcome.text
        outcome.seconds = self._clock() - started
        return outcome

    async def _outcome(self, action: Action) -> Outcome:
        tool = self.tools.get(action.name)
        if tool is None:
            names = ", ".join([*self.tools.names, "finish"])
            return Outcome(
                f"Unknown action '{action.name}'. Available actions: {names}. "
                "Write one of them as Action: name[input].",
                True,
            )
        try:
            argument = tool_input(tool, action.input)
            async with asyncio.timeout(self.timeout):
                result = await tool.run(argument)
        except TimeoutError:
            return Outcome(f"Error: {tool.name} did not finish within {self.timeout:g} s.", True)
        except ToolError as exc:
            return Outcome(f"Error: {exc}", True)
        except Exception as exc:
            log.exception("tool %s raised", tool.name)
            return Outcome(
                f"Error: the {tool.name} tool failed unexpectedly ({type(exc).__name__}).", True
            )
        if isinstance(result, ToolResult):
            return Outcome(result.text, False, result.sources, attachments=result.attachments)
        return Outcome(result, False)


def _only_string(text: str) -> str | None:
    """The value of a JSON object of one string member (``{"query": "x"}``), else None."""
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, dict) and len(value) == 1:
        (only,) = value.values()
        if isinstance(only, str):
            return only.strip()
    return None


def remembers(tool: Tool) -> bool:
    """Whether a person's "always" may stand for the rest of the conversation: not for a tool
    that says ``remember = False`` (each of its actions is approved on its own)."""
    return getattr(tool, "remember", True) is not False


Redecide = Callable[[int, TraceStep, Action, int], None]
"""Records (and announces) the action a step takes after a person edited it."""


class Approvals:
    """Whether an action runs, when its tool needs a person's approval: remembered for the
    conversation, asked of the approver (the run's deadline standing still meanwhile),
    approved (perhaps edited) or denied with the Observation the model will read."""

    def __init__(
        self,
        *,
        trace: Trace,
        tools: ToolRegistry,
        outbox: Outbox,
        approve: Approver | None,
        allowances: Allowances | None,
        listed: frozenset[str],
        timeout: float,
        remember: bool,
        clock: Callable[[], float],
        deadline: Callable[[], asyncio.Timeout | None],
        redecide: Redecide,
        show_within: float = 30.0,
    ) -> None:
        self.trace = trace
        self.show_within = show_within
        self.tools = tools
        self.outbox = outbox
        self.approve = approve
        self.allowances = allowances
        self.listed = listed
        self.timeout = timeout
        self.remember = remember
        self._clock = clock
        self._deadline = deadline
        self._redecide = redecide

    async def approved(
        self, n: int, step: TraceStep, action: Action, thought: str = ""
    ) -> tuple[Action, Outcome | None]:
        """The action as a person decided on it (None: no Observation yet, run it)."""
        tool = self.tools.get(action.name)
        if tool is None or not needs_approval(tool, self.listed):
            return action, None
        conversation, allowances = self.trace.conversation, self.allowances
        if allowances is not None and conversation and remembers(tool):
            by = await self._allowed_by(allowances, conversation, tool.name)
            if by is not None:
                self._record(n, step, "allowed", by, action.input)
                return action, None
        if self.approve is None:
            note = "This tool needs a person's approval, and nobody here can give it."
            self._record(n, step, "denied", None, action.input, note)
            return action, Outcome(note, True)
        decision = await self._ask(n, step, tool, action, thought)
        return await self._decided(n, step, tool, action, decision)

    async def _decided(
        self, n: int, step: TraceStep, tool: Tool, action: Action, decision: Decision | None
    ) -> tuple[Action, Outcome | None]:
        if decision is None:
            self._record(n, step, "timeout", None, action.input)
            note = f"No decision within {self.timeout:g} s, so the action was not run."
            return action, Outcome(note, True)
        if decision.verdict == "deny":
            self._record(
                n, step, "denied", decision.by, action.input, decision.reason, by_id=decision.by_id
            )
            reason = f" Their reason: {decision.reason}" if decision.reason else ""
            return action, Outcome("The user denied this action." + reason, True)
        conversation, allowances = self.trace.conversation, self.allowances
        always = decision.verdict == "always" and remembers(tool)
        if always and allowances is not None and conversation:
            with contextlib.suppress(StoreUnavailable):
                await allowances.allow(conversation, tool.name, by=decision.by)
        if decision.verdict == "edit" and decision.input is not None:
            edited = Action(action.name, decision.input)
            self._record(
                n, step, "edited", decision.by, edited.input, decision.reason, by_id=decision.by_id
            )
            assert step.approval is not None
            step.approval.input = action.input
            self._redecide(n, step, edited, step.call)
            return edited, None
        remembered = always
        self._record(
            n,
            step,
            "approved",
            decision.by,
            action.input,
            remembered=remembered,
            by_id=decision.by_id,
        )
        return action, None

    async def _ask(
        self, n: int, step: TraceStep, tool: Tool, action: Action, thought: str
    ) -> Decision | None:
        """Ask the approver; None when nobody decided in time."""
        assert self.approve is not None
        request = ApprovalRequest(
            run_id=self.trace.id,
            conversation=self.trace.conversation,
            asker=self.trace.user_id or self.trace.user,  # an id: approvers are checked by it
            step=n,
            call=step.call,
            thought=thought or step.thought,
            name=tool.name,
            input=action.input,
            json_input=parameters_of(tool) is not None,
            timeout=self.timeout,
            remember=self.remember and bool(self.trace.conversation) and remembers(tool),
        )
        visible = asyncio.Event()
        self.outbox.emit(
            ApprovalRequested(
                n,
                step.call,
                tool.name,
                action.input,
                request.thought,
                self.timeout,
                request.json_input,
                request.remember,
                shown=visible.set,
            )
        )
        with self._deadline_paused():
            try:
                async with asyncio.timeout(None) as window:
                    # The time to decide counts from when people can see the request.
                    clock = asyncio.create_task(self._start_when_shown(window, visible))
                    try:
                        return await self.approve(request)
                    finally:
                        clock.cancel()
            except TimeoutError:
                return None

    async def _start_when_shown(self, window: asyncio.Timeout, visible: asyncio.Event) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.show_within):
                await visible.wait()
        window.reschedule(asyncio.get_running_loop().time() + self.timeout)

    @contextlib.contextmanager
    def _deadline_paused(self) -> Iterator[None]:
        """The run's deadline stands still while a person decides: it is lifted, then set
        again as far ahead as the wait took."""
        deadline = self._deadline()
        when = deadline.when() if deadline is not None else None
        if deadline is None or when is None:
            yield
            return
        loop = asyncio.get_running_loop()
        paused = loop.time()
        deadline.reschedule(None)
        try:
            yield
        finally:
            deadline.reschedule(when + (loop.time() - paused))

    async def _allowed_by(self, allowances: Allowances, conversation: str, tool: str) -> str | None:
        try:
            return await allowances.allowed(conversation, tool)
        except StoreUnavailable:
            return None

    def _record(
        self,
        n: int,
        step: TraceStep,
        outcome: ApprovalOutcome,
        by: str | None,
        runs: str,
        reason: str = "",
        *,
        remembered: bool = False,
        by_id: str = "",
    ) -> None:
        step.approval = ApprovalRecord(
            outcome, by, self._clock(), None, reason, remembered, by_id=by_id
        )
        self.outbox.emit(ApprovalDecided(n, step.call, outcome, by, runs, reason, remembered))
