"""Turn a model's ReAct reply into one Step, whole (``parse``) or as it streams (``StreamParser``).

The prompt asks for::

    Thought: ...
    Action: name[input]            # one per reply; ``finish[answer]`` ends the run

Real models drift from that, so these shapes are accepted too: numbered labels
(``Action 2:``), ``Action: x`` + ``Action Input: y``, ``Final Answer:`` / ``Answer:``,
``Action: finish`` + ``Answer:``, markdown-bold labels, full-width colons, a JSON tool call
(``{"action": ..., "action_input": ...}`` or ``{"name": ..., "arguments": ...}``, fenced or
not, ``arguments`` itself JSON text or an object), text after the closing bracket, an Action
Input over several lines (a fenced code block) up to the next label, a reply that is only
``name[input]`` with no label at all, JSON-escaped text whose line breaks arrived as literal
``\n`` (read as line breaks up to the first real one), and a hallucinated ``Observation:``
(it and everything after it are dropped).

How the text is read:

* Labels are only recognised at the start of a line. The start of each line is held back
  until it is known not to be a label (at most ``_MAX_HEAD`` characters), so a live display
  never shows half a label such as ``"\\nAct"``; everything else is emitted as it arrives.
* Brackets are matched by depth, so ``search[C++ [lang]]`` keeps its inner brackets and the
  action is known the moment its bracket closes. If the bracket never closes, the input runs
  to the end of the reply (or the ``Observation:``), minus one trailing ``]``.
* ``parse`` is the stream parser fed the whole text, so both always agree.

Every character is looked at a bounded number of times (line heads are bounded, bodies are
scanned once), so feeding n characters in any chunking is O(n).
"""

from core.parser.stream import StreamParser, parse
from core.parser.types import (
    Action,
    ActionFound,
    AnswerText,
    ParseError,
    ParseEvent,
    Step,
    ThoughtText,
)

__all__ = [
    "Action",
    "ActionFound",
    "AnswerText",
    "ParseError",
    "ParseEvent",
    "Step",
    "StreamParser",
    "ThoughtText",
    "parse",
]
