"""``fidelity.step_log``: the plugin's step timing lines become steps lasting the engine's whole period."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.fidelity.step_log import read_lines, speed_probes, step_observations, timed_steps


def _line(done: float, model: float, pending: int, prefill: int = 0, decodes: int = 1) -> dict[str, float | int]:
    return {
        "pending": pending,
        "done_s": done,
        "model_s": model,
        "prefill_tokens": prefill,
        "prefill_context": 0,
        "decode_seqs": decodes,
        "decode_context": 100 * decodes,
    }


def test_a_step_followed_at_once_lasts_until_the_next_starts_and_an_idle_one_gets_the_typical_gap() -> None:
    records = [
        _line(1.010, 0.010, pending=1, prefill=300, decodes=0),  # starts at 1.000
        _line(1.016, 0.005, pending=1),  # starts at 1.011: 1 ms in between
        _line(1.024, 0.005, pending=0),  # starts at 1.019: 3 ms in between; then idle
        _line(5.006, 0.005, pending=0),  # the last step: idle after it too
    ]
    periods = [obs.durations_s[0] for obs in step_observations(list(reversed(records)))]  # any order in
    assert periods == pytest.approx([0.011, 0.008, 0.007, 0.007])  # idle ones: model + median(1, 3) ms
    first = step_observations(records)[0]
    assert (first.num_prefill_tokens, first.num_decode_seqs) == (300, 0)


def test_a_speed_probe_between_two_steps_is_not_charged_to_the_engine() -> None:
    records = [
        _line(1.010, 0.010, pending=1),  # the next step starts at 1.0125: 2.5 ms after, 2 ms of it a probe
        {"probe_s": 0.002, "done_s": 1.012},
        _line(1.0175, 0.005, pending=0),
    ]
    periods = [obs.durations_s[0] for obs in step_observations(records)]
    assert periods == pytest.approx([0.0105, 0.0055])
    assert speed_probes(records) == [(1.012, 0.002)]
    assert [done for done, _ in timed_steps(records)] == [1.010, 1.0175]


def test_an_engine_that_never_went_straight_on_costs_its_model_steps_alone() -> None:
    periods = [obs.durations_s[0] for obs in step_observations([_line(1.0, 0.004, 0), _line(2.0, 0.006, 0)])]
    assert periods == pytest.approx([0.004, 0.006])


@given(st.lists(st.tuples(st.floats(0.001, 0.05), st.floats(0.0, 0.01), st.booleans()), min_size=1, max_size=30))
def test_every_step_lasts_at_least_its_model_step(steps: list[tuple[float, float, bool]]) -> None:
    records, clock = [], 0.0
    for model, gap, straight_on in steps:
        clock += model
        records.append(_line(clock, model, pending=int(straight_on)))
        clock += gap
    observations = step_observations(records)
    assert len(observations) == len(records)
    for observation, (model, _, _) in zip(observations, steps, strict=True):
        assert observation.durations_s[0] >= model - 1e-9


def test_lines_are_read_in_segments_and_a_partial_last_line_waits(tmp_path: Path) -> None:
    path = tmp_path / "timings.jsonl"
    path.write_text(json.dumps(_line(1.0, 0.01, 1)) + "\n" + '{"pending": 0, "done')
    records, offset = read_lines(path, 0)
    assert len(records) == 1 and offset == len(json.dumps(_line(1.0, 0.01, 1))) + 1
    with path.open("a") as handle:
        handle.write('_s": 2.0, "model_s": 0.01}\n')
    rest, end = read_lines(path, offset)
    assert rest == [{"pending": 0, "done_s": 2.0, "model_s": 0.01}] and end == path.stat().st_size
    assert read_lines(path, end) == ([], end)
    path.write_text("not json\n")
    with pytest.raises(ConfigError, match="step timing file"):
        read_lines(path, 0)
