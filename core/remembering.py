"""One run's memories (issue 43): the ``remember`` and ``forget`` tools bound to its asker,
and the recall before its first step, recorded in its trace.

The recall is read from the store at each run (no cache: a memory forgotten on any process
is gone from the next run), given to the model as fenced data (``core.prompt.memory_message``),
and kept in the trace as a step of index 0, ``recall_memories``, whose observation is the
lines the model read: every trace view shows which memories were given. A trace in a shared
place is read by everyone there, so a person's fact told elsewhere shows there by its id
only (``core.memories.trace_line``); its text stays the asker's to read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from core.errors import StoreUnavailable
from core.memories import Asking, Memories, memory_lines, trace_line
from core.tools import ToolRegistry
from core.tools.memory import NAMES, memory_tools
from core.trace import Trace, TraceStep

log = logging.getLogger(__name__)

RECALL_MEMORIES = "recall_memories"
"""The action name of the trace step that records the memories a run was given."""
UNAVAILABLE = "memories unavailable: the store did not answer, so none were recalled"


class RunMemory:
    def __init__(self, memories: Memories, asking: Asking, trace: Trace) -> None:
        self.memories = memories
        self.asking = asking
        self.trace = trace

    def tools(self, registry: ToolRegistry) -> ToolRegistry:
        """``registry`` with this run's ``remember`` and ``forget`` (any of those names it
        had are replaced: nothing else may change memories)."""
        combined = ToolRegistry()
        for tool in registry:
            if tool.name.lower() not in NAMES:
                combined.add(tool)
        for tool in memory_tools(self.memories, self.asking, trace=self.trace.id):
            combined.add(tool)
        return combined

    async def recall(self, at: float, *, say: Callable[[str], None] | None = None) -> str:
        """The lines of the memories this run is given ("" for none), recorded in the
        trace; a store that does not answer costs the recall, never the answer, and is
        said in one line (``say``: the run's status line) and in the trace."""
        try:
            given = await self.memories.recall(self.asking)
        except StoreUnavailable:
            log.warning("run %s: memories not recalled, the store is unavailable", self.trace.id)
            self.trace.notices.append(UNAVAILABLE)
            if say is not None:
                say(UNAVAILABLE)
            return ""
        if not given:
            return ""
        lines = memory_lines(given)
        self.trace.steps.append(
            TraceStep(
                index=0,
                action=RECALL_MEMORIES,
                action_input=f"{len(given)} memories: " + ", ".join(m.id for m in given),
                observation="\n".join(trace_line(m, self.asking) for m in given),
                started_at=at,
                ended_at=at,
            )
        )
        return lines
