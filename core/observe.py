"""Watching runs from outside: the seam for metrics and OpenTelemetry.

An ``Agent`` takes ``observers``; each is asked for a ``RunProbe`` when a run starts, and the
run tells that probe about each model call, each tool call and its end. The probes decide
what to count or export; the agent knows nothing of Prometheus or OTLP.

Every call is synchronous and made on the run's own task, so it must be cheap and must not
block. An observer that raises is logged once and is not asked again for that run: watching
a run never changes how it ends. With no observers the agent pays nothing per chunk.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from core.events import FinalEvent
from core.llm import ChatModel, Message, ModelChunk, ResponseFormat, Sampled, ToolSpec, Usage
from core.trace import Trace

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What one request asks of the model, as far as watching it goes."""

    stop: tuple[str, ...] = ()
    output: Literal["text", "json"] = "text"
    """``json``: the request asks for a JSON object (a ``response_format``)."""
    temperature: float | None = None
    max_tokens: int | None = None
    """The model's sampling settings, when it says (``core.llm.Sampled``)."""


class ModelCallProbe(Protocol):
    """One request to a model: from ``stream`` being called to its last chunk."""

    def first_chunk(self) -> None:
        """The first chunk of the reply arrived (time to first token)."""

    def response(self, id: str, model: str) -> None:
        """The provider named the reply and the model that wrote it (either may be "")."""

    def chunk(self, usage: Usage | None, finish: str | None) -> None:
        """A chunk that carries usage or a finish reason (most carry neither)."""

    def end(self, error: BaseException | None) -> None:
        """The reply ended: read to its end, stopped early (None), or failed."""


class ToolCallProbe(Protocol):
    def end(self, text: str, error: bool) -> None:
        """The tool's Observation (``error``: it failed, timed out, or was unknown)."""


class RunProbe(Protocol):
    def model_call(self, step: int, model: str, request: ModelRequest) -> ModelCallProbe: ...

    def tool_call(
        self, step: int, call_id: str | None, name: str, input: str, description: str
    ) -> ToolCallProbe:
        """A tool about to run (after any approval: waiting for a person is not tool time);
        ``description``: the tool's own, "" for a name no tool has."""
        ...

    def end(self, final: FinalEvent) -> None:
        """The run's outcome; ``final.trace`` holds its steps, usage and status."""


class RunObserver(Protocol):
    def start(self, trace: Trace) -> RunProbe:
        """A run begins (``trace`` has its id, conversation, user, mode and question)."""
        ...


class _Guarded:
    """Calls into observer code, each failure logged and that observer dropped for the run."""

    __slots__ = ("_broken",)

    def __init__(self) -> None:
        self._broken = False

    def _failed(self, what: str) -> None:
        if not self._broken:
            log.exception("a run observer failed (%s); it is ignored for this run", what)
        self._broken = True

    def _each(self, items: Iterable[_T], what: str, call: Callable[[_T], _R]) -> list[_R]:
        """``call`` on every item, in order; an item whose call raises is left out (logged)."""
        results = []
        for item in items:
            try:
                results.append(call(item))
            except Exception:
                self._failed(what)
        return results


class _ModelCall(_Guarded):
    __slots__ = ("_probes",)

    def __init__(self, probes: list[ModelCallProbe]) -> None:
        super().__init__()
        self._probes = probes

    def first_chunk(self) -> None:
        self._each(self._probes, "first chunk", lambda probe: probe.first_chunk())

    def response(self, id: str, model: str) -> None:
        self._each(self._probes, "response", lambda probe: probe.response(id, model))

    def chunk(self, usage: Usage | None, finish: str | None) -> None:
        self._each(self._probes, "chunk", lambda probe: probe.chunk(usage, finish))

    def end(self, error: BaseException | None) -> None:
        self._each(self._probes, "model call end", lambda probe: probe.end(error))


class _ToolCall(_Guarded):
    __slots__ = ("_probes",)

    def __init__(self, probes: list[ToolCallProbe]) -> None:
        super().__init__()
        self._probes = probes

    def end(self, text: str, error: bool) -> None:
        self._each(self._probes, "tool call end", lambda probe: probe.end(text, error))


class Probes(_Guarded):
    """Every observer's probe for one run, behind one ``RunProbe``."""

    __slots__ = ("_probes",)

    def __init__(self, observers: Sequence[RunObserver], trace: Trace) -> None:
        super().__init__()
        self._probes: list[RunProbe] = self._each(
            observers, "run start", lambda observer: observer.start(trace)
        )

    def model_call(self, step: int, model: str, request: ModelRequest) -> _ModelCall:
        return _ModelCall(
            self._each(
                self._probes, "model call", lambda probe: probe.model_call(step, model, request)
            )
        )

    def tool_call(
        self, step: int, call_id: str | None, name: str, input: str, description: str
    ) -> _ToolCall:
        probes = self._each(
            self._probes,
            "tool call",
            lambda probe: probe.tool_call(step, call_id, name, input, description),
        )
        return _ToolCall(probes)

    def end(self, final: FinalEvent) -> None:
        self._each(self._probes, "run end", lambda probe: probe.end(final))


class WatchedModel:
    """A ``ChatModel`` whose every request is reported to a run's probes."""

    def __init__(self, model: ChatModel, probes: Probes, step: int) -> None:
        self._model = model
        self._probes = probes
        self._step = step

    @property
    def name(self) -> str:
        return self._model.name

    def stream(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str],
        tools: Sequence[ToolSpec] | None = None,
        response_format: ResponseFormat | None = None,
    ) -> AsyncIterator[ModelChunk]:
        model = self._model
        request = ModelRequest(stop=tuple(stop), output="json" if response_format else "text")
        if isinstance(model, Sampled):
            request = ModelRequest(
                request.stop, request.output, model.temperature, model.max_tokens
            )
        probe = self._probes.model_call(self._step, model.name, request)
        inner = self._model.stream(
            messages, stop=stop, tools=tools, response_format=response_format
        )
        return _watched(inner, probe)


async def _watched(
    inner: AsyncIterator[ModelChunk], probe: _ModelCall
) -> AsyncIterator[ModelChunk]:
    error: BaseException | None = None
    try:
        first = True
        async for chunk in inner:
            if first:
                probe.first_chunk()
                first = False
            if chunk.usage is not None or chunk.finish:
                probe.chunk(chunk.usage, chunk.finish)
            if chunk.response_id or chunk.response_model:
                probe.response(chunk.response_id, chunk.response_model)
            yield chunk
    except BaseException as exc:  # GeneratorExit (closed early) is not the call's failure
        if not isinstance(exc, GeneratorExit):
            error = exc
        raise
    finally:
        probe.end(error)
        aclose = getattr(inner, "aclose", None)
        if aclose is not None:
            await aclose()
