"""One SLO-autoscaled spec for the session, and its capacities computed once by the advisor."""

from __future__ import annotations

import pytest
from support import slo_autoscaled

from hyperpod_dpd import DpdSpec
from hyperpod_dpd.scaling import RoleCapacity
from hyperpod_dpd.scaling.shape import pin_capacities


@pytest.fixture(scope="session")
def slo_spec() -> DpdSpec:
    return slo_autoscaled()


@pytest.fixture(scope="session")
def advised(slo_spec: DpdSpec) -> dict[str, RoleCapacity]:
    """Both roles' capacities by the advisor (AIConfigurator's data: about 8 s, once per session)."""
    from hyperpod_dpd.advisor.capacity import capacities

    return capacities(slo_spec)


@pytest.fixture(scope="session")
def resolved(slo_spec: DpdSpec, advised: dict[str, RoleCapacity]) -> DpdSpec:
    """The spec with the advisor's capacities pinned, as synth renders it."""
    return pin_capacities(slo_spec, {role: round(c.tokens_per_s, 1) for role, c in advised.items()})
