"""How many examples a property test draws: the Hypothesis profiles of this suite.

``ci`` (the default: ``make test`` and CI) bounds every property so the whole suite stays
inside a few minutes on two cores: a tenth of each property's thorough count, between 10
and 15 (the costliest draw whole 50-step runs), and a deadline that only a pathological
example (a renderer gone quadratic) would reach.
``thorough`` (``make test-thorough``) draws every property's full count, with no deadline.
Choose with ``HYPOTHESIS_PROFILE=ci|thorough``; a failure prints the blob that replays it.

A property states its thorough count once: ``@property_settings(500)``.
"""

from __future__ import annotations

import os
from datetime import timedelta

from hypothesis import HealthCheck, settings

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
PROFILES = ("ci", "thorough")
_SLOW_DATA = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile("ci", max_examples=25, deadline=timedelta(seconds=5), print_blob=True)
settings.register_profile("thorough", max_examples=200, deadline=None, print_blob=True)
if PROFILE not in PROFILES:
    raise RuntimeError(f"HYPOTHESIS_PROFILE must be one of {PROFILES}, not {PROFILE!r}")
settings.load_profile(PROFILE)


def examples(thorough: int, *, ci: int | None = None) -> int:
    """``thorough`` under the thorough profile; under ``ci``, ``ci`` if given (the costliest
    properties), else a tenth of ``thorough``, 10 to 15."""
    if PROFILE == "thorough":
        return thorough
    return ci if ci is not None else min(15, max(10, thorough // 10))


def property_settings(thorough: int, *, ci: int | None = None) -> settings:
    """The settings of a costly property: big drawn inputs are its point, so Hypothesis'
    too-slow and data-too-large health checks are off; the profile keeps its deadline."""
    return settings(max_examples=examples(thorough, ci=ci), suppress_health_check=_SLOW_DATA)
