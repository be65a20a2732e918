"""Every scenario on every surface (issue 41): platform x scenario, recorded as the product
is today. Known gaps are ``xfail(strict=True)``: a slice that closes one makes its row
fail until the gap is taken out of ``scenarios.py``. The grid is docs/conformance.md
(written by ``conftest.py`` after a run of the whole table)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conformance.drivers import PLATFORMS, open_driver
from tests.conformance.scenarios import SCENARIOS, Scenario


def rows() -> Iterator[Any]:
    for scenario in SCENARIOS:
        for platform in PLATFORMS:
            marks: list[pytest.MarkDecorator] = []
            if platform in scenario.skips:
                marks.append(pytest.mark.skip(reason=scenario.skips[platform]))
            elif platform in scenario.gaps:
                marks.append(pytest.mark.xfail(strict=True, reason=scenario.gaps[platform]))
            yield pytest.param(platform, scenario, id=f"{scenario.name}-{platform}", marks=marks)


@pytest.mark.parametrize(("platform", "scenario"), list(rows()))
async def test_row(platform: str, scenario: Scenario) -> None:
    async with open_driver(
        platform,
        scenario.turns,
        merge_window=scenario.merge_window,
        approval=scenario.approval,
        lease=scenario.lease,
        room=scenario.room,
        elsewhere=scenario.elsewhere,
    ) as d:
        await scenario.run(d)
