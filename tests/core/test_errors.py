"""Errors slosched raises on purpose survive a process boundary (``core/errors.py``): a process pool's worker
sends a task's error back pickled, and the parent must get the same error, field and message, not a broken
pool."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

from slosched.bench.base import BenchmarkFailed
from slosched.core.errors import ConfigError, UnknownNameError
from slosched.core.problems import ConfigProblems, Problem


def _raise_config_error(value: str) -> None:
    raise ConfigError("stack.token_budget", f"must be an integer, got {value!r}")


@pytest.mark.parametrize(
    "error",
    [
        ConfigError("router.balance_rel", "must be >= 0, got -1"),
        UnknownNameError("policy", "nope", ["fcfs", "prism"]),
        ConfigProblems([Problem("a", "bad"), Problem("b", "worse")]),
        BenchmarkFailed("no request reached a server"),
    ],
)
def test_errors_round_trip_through_pickle(error: Exception) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.__dict__ == error.__dict__


def test_a_workers_config_error_reaches_the_parent_as_itself() -> None:
    with ProcessPoolExecutor(max_workers=1) as pool:
        future = pool.submit(_raise_config_error, "big")
        with pytest.raises(ConfigError) as raised:
            future.result()
    assert raised.value.field == "stack.token_budget"
    assert "'big'" in str(raised.value)
