"""A local OTLP/HTTP trace receiver for tests: what a collector, Jaeger or Langfuse accepts.

``POST /v1/traces`` with ``Content-Type: application/x-protobuf`` (optionally
``Content-Encoding: gzip``) and an ``ExportTraceServiceRequest`` body is decoded with the
OpenTelemetry protobuf package and answered ``200`` with an empty
``ExportTraceServiceResponse``, as the OTLP/HTTP specification says. What a collector refuses
is refused the same way: another path ``404``, another method ``405``, another content type or
encoding ``415``, a body that does not decode ``400`` (each failure body a ``google.rpc.Status``).

Usage::

    async with FakeOTLP() as otlp:
        ...  # export to otlp.endpoint (a base URL, like OTEL_EXPORTER_OTLP_ENDPOINT)
        spans = otlp.spans  # every span received, flattened (``ReceivedSpan``)
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from aiohttp import web
from google.protobuf.message import DecodeError
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.fakes.local_server import serve_locally

PROTOBUF = "application/x-protobuf"
MAX_BODY = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ReceivedSpan:
    name: str
    kind: int
    """``opentelemetry.proto.trace.v1.Span.SpanKind`` (1 internal, 3 client)."""
    trace_id: str
    span_id: str
    parent_span_id: str
    """Empty for a root span."""
    attributes: dict[str, Any]
    status_code: int
    """0 unset, 1 ok, 2 error."""
    status_message: str
    start_ns: int
    end_ns: int
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in value.kvlist_value.values}
    return None if kind is None else getattr(value, kind)


def flatten(request: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    spans = []
    for resource_spans in request.resource_spans:
        resource = {a.key: value_of(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        name=span.name,
                        kind=span.kind,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        attributes={a.key: value_of(a.value) for a in span.attributes},
                        status_code=span.status.code,
                        status_message=span.status.message,
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        resource=resource,
                        scope=scope_spans.scope.name,
                    )
                )
    return spans


class FakeOTLP:
    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        """The headers of each accepted request (authorization, as a backend checks it)."""
        self.refused: list[int] = []
        self._runner: web.AppRunner | None = None
        self._port = 0

    @property
    def endpoint(self) -> str:
        """The base URL (``/v1/traces`` is the exporter's to add)."""
        return f"http://127.0.0.1:{self._port}"

    @property
    def spans(self) -> list[ReceivedSpan]:
        return [span for request in self.requests for span in flatten(request)]

    def named(self, name: str) -> list[ReceivedSpan]:
        return [span for span in self.spans if span.name == name]

    async def _traces(self, request: web.Request) -> web.Response:
        if request.content_type != PROTOBUF:
            return self._refuse(415, f"unsupported content type {request.content_type!r}")
        encoding = request.headers.get("Content-Encoding", "identity").lower()
        if encoding not in ("identity", "gzip"):
            return self._refuse(415, f"unsupported content encoding {encoding!r}")
        body = await request.read()
        try:
            if encoding == "gzip":
                body = gzip.decompress(body)
            message = ExportTraceServiceRequest.FromString(body)
        except (OSError, DecodeError) as exc:
            return self._refuse(400, f"cannot decode the request: {exc}")
        self.requests.append(message)
        self.headers.append(dict(request.headers))
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(), content_type=PROTOBUF
        )

    def _refuse(self, status: int, message: str) -> web.Response:
        self.refused.append(status)
        body = Status(code=3, message=message).SerializeToString()  # INVALID_ARGUMENT
        return web.Response(status=status, body=body, content_type=PROTOBUF)

    async def _other_method(self, request: web.Request) -> web.Response:
        return self._refuse(405, f"method {request.method} not allowed")

    async def start(self) -> None:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post("/v1/traces", self._traces)
        app.router.add_route("*", "/v1/traces", self._other_method)
        self._runner, self._port = await serve_locally(app)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
