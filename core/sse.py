"""``SSEDecoder``: server-sent events from a byte stream, as the WHATWG spec reads them.

Pure (no I/O, no clock): ``feed(chunk)`` returns the events the bytes complete, ``close()``
ends the stream. An event is ``(name, data)``: ``name`` is ``""`` when the event set none
(the spec's "message"), ``data`` its ``data:`` lines joined with ``"\\n"``.

What the spec asks and the decoder does: lines end with CRLF, LF or CR, and any of them may
be split across chunks (a CR at a chunk's end waits for the next one to say whether an LF
follows); a line beginning with ``:`` is a comment; one space after the field's colon is
dropped; a field with no colon has an empty value; a blank line dispatches the event, unless
it has no data; ``id`` and ``retry`` are read and ignored (a model's reply is never resumed);
a leading byte-order mark is skipped; bytes that are not UTF-8 become U+FFFD; an event the
stream ends in the middle of is dropped.

A chunk holding exactly one ``data:`` event (what providers send, one per write) takes a
shorter path; a property test holds both to the spec. A chunk that ends no line is only kept (no copy of what came before), so a huge line in many
small chunks costs linear time.
"""

from __future__ import annotations

__all__ = ["SSEDecoder", "ServerSentEvent"]

ServerSentEvent = tuple[str, str]
"""``(event name or "", data)``."""

_BOM = "\ufeff".encode()


class SSEDecoder:
    __slots__ = ("_between", "_data", "_event", "_pending", "_skip_lf", "_started")

    def __init__(self) -> None:
        self._pending: list[bytes] = []
        """The pieces of the line being read (none of them holds a line end)."""
        self._skip_lf = False
        """The last chunk ended in a CR: an LF opening the next one belongs to it."""
        self._started = False
        self._data: list[str] = []
        self._event = ""
        self._between = False
        """Between two events, with nothing held: a chunk that is one whole event can be
        read as it stands."""

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        if (  # the commonest chunk by far: one whole "data:" event, with nothing around it
            self._between
            and chunk.startswith(b"data:")
            and chunk.find(b"\n") == len(chunk) - 2
            and chunk.endswith(b"\n\n")
            and b"\r" not in chunk
        ):
            value = chunk[6:-2] if chunk[5] == 32 else chunk[5:-2]  # one space after ":"
            return [("", value.decode("utf-8", "replace"))]
        events = self._feed(chunk)
        self._between = self._started and not (
            self._pending or self._data or self._event or self._skip_lf
        )
        return events

    def _feed(self, chunk: bytes) -> list[ServerSentEvent]:
        if self._skip_lf:
            self._skip_lf = False
            if chunk.startswith(b"\n"):
                chunk = chunk[1:]
        if b"\n" not in chunk and b"\r" not in chunk:
            if chunk:
                self._pending.append(chunk)
            return []
        if self._pending:
            self._pending.append(chunk)
            chunk = b"".join(self._pending)
            self._pending = []
        if chunk.endswith(b"\r"):
            chunk = chunk[:-1]
            self._skip_lf = True
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = chunk.split(b"\n")
        rest = lines.pop()
        if self._skip_lf:
            lines.append(rest)  # the CR we cut off ended it
        elif rest:
            self._pending = [rest]
        return self._lines(lines)

    def close(self) -> list[ServerSentEvent]:
        """The end of the stream. An event it cuts short (no blank line after it) is dropped,
        as the spec says, so nothing comes out; the decoder is ready for a new stream."""
        self._pending, self._skip_lf, self._started = [], False, False
        self._data, self._event, self._between = [], "", False
        return []

    def _lines(self, lines: list[bytes]) -> list[ServerSentEvent]:
        if not self._started:
            self._started = True
            if lines[0].startswith(_BOM):
                lines[0] = lines[0][len(_BOM) :]
        events: list[ServerSentEvent] = []
        for raw in lines:
            if not raw:
                if self._data:
                    events.append((self._event, "\n".join(self._data)))
                self._data, self._event = [], ""
            elif raw[0] != 58:  # not a comment (":")
                self._field(raw.decode("utf-8", "replace"))
        return events

    def _field(self, line: str) -> None:
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
