"""The conformance table's grid: docs/conformance.md, rewritten after a run that covered
every row (a partial run leaves it alone). Deterministic: the cells say pass, a known gap
with its reason, or not applicable with its reason, and nothing about timings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance.drivers import PLATFORMS
from tests.conformance.grid import GRID, render
from tests.conformance.scenarios import SCENARIOS

_outcomes: dict[tuple[str, str], str] = {}


@pytest.fixture(autouse=True)
def _timedelta(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("PTB_TIMEDELTA", "true")  # python-telegram-bot's datetime.timedelta
    yield


def _row_of(nodeid: str) -> tuple[str, str] | None:
    if "test_conformance.py::test_row[" not in nodeid:
        return None
    scenario, _, platform = nodeid.rsplit("[", 1)[1].rstrip("]").rpartition("-")
    return scenario, platform


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Called where the results arrive (the controller under xdist)."""
    row = _row_of(report.nodeid)
    if row is None:
        return
    if report.skipped and hasattr(report, "wasxfail"):
        _outcomes[row] = "xfail"
    elif report.skipped:
        _outcomes[row] = "skip"
    elif report.failed:
        _outcomes[row] = "FAILED"
    elif report.when == "call":
        _outcomes[row] = "pass"


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the controller writes
    wanted = {(s.name, p) for s in SCENARIOS for p in PLATFORMS}
    if wanted <= _outcomes.keys():
        text = render(_outcomes)
        if not GRID.exists() or GRID.read_text() != text:
            GRID.write_text(text)
