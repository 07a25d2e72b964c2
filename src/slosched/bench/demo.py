"""The bundled demo scenario (``slosched demo``, ``make demo``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def demo_scenario_path() -> Path:
    return Path(str(resources.files("slosched.bench").joinpath("scenarios/demo.yaml")))
