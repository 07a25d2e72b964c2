"""Tenant classes in job-level admission: the bands of fair sharing, read by the job layer too.

A deployment that gives its tenants bands (``fair_share.tenants.NAME.band`` in a scenario, a tenant's
``priority`` in the gateway) has its engines serve a lower band first (``policies/fairness``). Admission must
judge a job against the work that will really run before it, so with bands the backlog tests
(``critical-path``'s ``backlog`` setting) count, for a job of band ``b``:

- waiting calls that can still count of every band below ``b`` (the engine serves them first whatever
  their deadlines), and of band ``b`` itself as without bands (due no later, for the demand test);
- committed later stages of admitted jobs due no later, of band ``b`` and below;
- never the waiting or committed work of a band above ``b``: its calls wait behind the job's.

So under overload the lower band keeps its jobs feasible and the higher band is relegated first: the
"priorities per tenant class" of early relegation. Without bands (no fair sharing, or no tenant given a
band) every job is in band 0 and the tests are exactly the ones without this module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from slosched.core.request import Request
from slosched.policies.fairness.spec import FairShareSpec

BandOf = Callable[[str], float]
"""A tenant's band (lower is served first); ``FairShareSpec.band_of``."""


@runtime_checkable
class BandAware(Protocol):
    """A job policy whose admission reads tenant bands; the shared policy builder hands them over."""

    def use_bands(self, band_of: BandOf | None) -> None: ...


def bands_of(fair: FairShareSpec | None) -> BandOf | None:
    """The tenants' bands of a fair-sharing spec; None (one band) without one or when no tenant has a band."""
    return fair.band_of if fair is not None and fair.bands else None


def job_band(requests: Sequence[Request], band_of: BandOf | None) -> float:
    """The band of the job whose released calls are ``requests`` (a job has one tenant); 0 without bands."""
    if band_of is None or not requests:
        return 0.0
    return band_of(requests[0].tenant)


def served_before(tenant: str, band: float, band_of: BandOf | None) -> bool | None:
    """Whether a waiting call of ``tenant`` is served before a job of ``band`` whatever its deadline (True:
    a lower band), never before it (False: a higher band), or by deadline (None: the same band)."""
    if band_of is None:
        return None
    other = band_of(tenant)
    if other == band:
        return None
    return other < band
