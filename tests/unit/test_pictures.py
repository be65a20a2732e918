"""Pictures out: what a tool returned is an image only by its bytes, within files.max_bytes
and the trace's room, at most ``MAX_PICTURES`` per answer."""

from __future__ import annotations

import base64

from hypothesis import given
from hypothesis import strategies as st

from core.agent import kept_attachments
from core.pictures import MAX_PICTURES, picture_type, pictures_of
from core.tools import Attachment
from core.trace import Trace, TraceStep
from tests.properties import property_settings

PNG = b"\x89PNG\r\n\x1a\n" + bytes(30)
JPEG = b"\xff\xd8\xff\xe0" + bytes(30)
WEBP = b"RIFF\x00\x00\x00\x00WEBPVP8 " + bytes(30)
GIF = b"GIF89a" + bytes(30)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _trace(*attachments: Attachment, max_bytes: int | None = None) -> Trace:
    trace = Trace("q")
    step = TraceStep(1, action="chart")
    trace.steps.append(step)
    step.attachments = kept_attachments(trace, attachments, max_bytes=max_bytes)
    return trace


def test_each_kind_is_told_by_its_bytes() -> None:
    assert [picture_type(d) for d in (PNG, JPEG, WEBP, GIF)] == [
        "image/png",
        "image/jpeg",
        "image/webp",
        "image/gif",
    ]
    assert picture_type(b"<svg xmlns='http://www.w3.org/2000/svg'/>") is None
    assert picture_type(b"BM" + bytes(30)) is None  # BMP: not every surface shows it


def test_the_claimed_type_is_never_trusted() -> None:
    trace = _trace(
        Attachment("image/png", _b64(JPEG)),  # a JPEG claiming PNG: sent as the JPEG it is
        Attachment("image/png", _b64(b"<svg onload=alert(1)>")),  # no image at all
        Attachment("audio/wav", _b64(PNG)),  # not offered as an image
        Attachment("image/gif", "%%% not base64 %%%"),
    )
    (picture,) = pictures_of(trace)
    assert (picture.name, picture.mime_type, picture.data) == ("picture-1.jpg", "image/jpeg", JPEG)


def test_an_image_over_files_max_bytes_stays_listed_not_kept() -> None:
    trace = _trace(Attachment("image/png", _b64(PNG)), max_bytes=len(PNG) - 1)
    (kept,) = trace.steps[0].attachments
    assert kept.data is None and kept.size == len(PNG)
    assert pictures_of(trace) == []
    assert "not kept" in trace.to_markdown()


def test_at_most_max_pictures_per_answer() -> None:
    trace = _trace(*[Attachment("image/png", _b64(PNG))] * (MAX_PICTURES + 2))
    pictures = pictures_of(trace)
    assert [p.name for p in pictures] == [f"picture-{n}.png" for n in range(1, MAX_PICTURES + 1)]


@property_settings(300)
@given(st.binary(max_size=200), st.sampled_from(["image/png", "image/jpeg", "text/plain"]))
def test_only_bytes_that_start_as_an_image_come_out(data: bytes, claimed: str) -> None:
    pictures = pictures_of(_trace(Attachment(claimed, _b64(data))))
    for picture in pictures:
        assert picture.data == data and picture_type(data) == picture.mime_type
    if picture_type(data) is None or not claimed.startswith("image/"):
        assert pictures == []
