"""The compiled modules give the same records as the sources, bit for bit, on every bundled scenario.

Each mode runs in its own child process (a process imports either the compiled modules or the sources,
never both). Without a compiled build the comparison is skipped, unless ``SLOSCHED_REQUIRE_NATIVE=1``
(``make test`` builds one and sets it), where a missing build fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slosched.native import native_status

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = os.environ.get("SLOSCHED_REQUIRE_NATIVE") == "1"


def _probe(native: bool, quick: bool, module: str = "tests.native._identity_probe") -> dict[str, object]:
    env = {**os.environ, "SLOSCHED_NATIVE": "1" if native else "0"}
    args = [sys.executable, "-m", module, *(["quick"] if quick else [])]
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=600)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _require_build() -> None:
    status = native_status(fresh=True)
    if not status.active:
        if REQUIRED:
            pytest.fail(f"SLOSCHED_REQUIRE_NATIVE=1 but the compiled modules are not in use: {status.reason}")
        pytest.skip(f"no compiled build: {status.reason}")


def _compare(quick: bool) -> None:
    _require_build()
    compiled, pure = _probe(native=True, quick=quick), _probe(native=False, quick=quick)
    assert compiled["compiled"] is True and pure["compiled"] is False
    assert compiled["digests"] and compiled["digests"] == pure["digests"]


def test_compiled_demo_runs_equal_the_sources() -> None:
    _compare(quick=True)


def test_numpy_numbers_from_specs_and_policies_run_as_in_the_sources() -> None:
    """Compiled code checks declared types strictly; numpy numbers in jobs, instance specs and a third-party
    router's, batching's and predictor's answers must still run, with the records the sources give."""
    _require_build()
    module = "tests.native._numpy_probe"
    compiled, pure = _probe(True, False, module), _probe(False, False, module)
    assert compiled["compiled"] is True and pure["compiled"] is False
    assert compiled["digest"] == pure["digest"]


@pytest.mark.slow
def test_compiled_runs_equal_the_sources_on_every_bundled_scenario() -> None:
    _compare(quick=False)


def test_compiled_modules_are_used_where_required() -> None:
    import slosched.sim.cluster
    from slosched.native import is_compiled

    if not REQUIRED:
        pytest.skip("SLOSCHED_REQUIRE_NATIVE is not set")
    assert native_status().active, native_status().reason
    assert is_compiled(slosched.sim.cluster)
