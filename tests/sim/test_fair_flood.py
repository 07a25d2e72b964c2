"""Done-when of fair sharing, simulated: a 3,000-row relQuery from one tenant costs the other tenant at most
5 points of attainment with fair sharing, and far more without (``examples/flooding-tenant.yaml``)."""

from __future__ import annotations

from pathlib import Path

from slosched.experiment import flood_figures
from slosched.scenario.config import load_scenario

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flooding-tenant.yaml"


def test_a_flooding_tenant_costs_the_others_at_most_5_points_with_fair_sharing() -> None:
    figures = flood_figures(load_scenario(EXAMPLE))
    assert figures.calm_fair == figures.calm_fcfs  # without the flood, one tenant: fair sharing changes nothing
    assert figures.drop_fair_points <= 5.0, figures
    assert figures.drop_fcfs_points >= 1.5 * figures.drop_fair_points + 5.0, figures  # off: the drop is large
    assert figures.flooder_fair == 1.0  # the flooder's relQuery still meets its own SLO
