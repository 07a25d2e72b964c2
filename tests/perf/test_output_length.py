from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.perf.output_length import BUCKET_MIN_SAMPLES, HistoryOutputPredictor, prompt_bucket


def make_request(
    template: str = "t",
    stage: str = "s",
    prompt_tokens: int = 100,
    max_output_tokens: int = 1000,
    rid: str = "r",
) -> Request:
    return Request(
        id=rid,
        job_id="j",
        stage=stage,
        template=template,
        prompt_tokens=prompt_tokens,
        max_output_tokens=max_output_tokens,
        arrival_s=0.0,
        job_arrival_s=0.0,
    )


def test_prior_before_any_data() -> None:
    predictor = HistoryOutputPredictor()
    assert predictor.predict(make_request()) == 128.0
    assert predictor.predict(make_request(max_output_tokens=50)) == 50.0
    assert HistoryOutputPredictor(default_tokens=300).predict(make_request()) == 300.0


def test_learns_per_key_with_global_fallback() -> None:
    predictor = HistoryOutputPredictor()
    for tokens in (10, 20, 30):
        predictor.observe(make_request("sql", "gen"), tokens)
    for tokens in (400, 600):
        predictor.observe(make_request("sql", "fix"), tokens)
    assert predictor.predict(make_request("sql", "gen")) == pytest.approx(20.0)
    assert predictor.predict(make_request("sql", "fix")) == pytest.approx(500.0)
    # An unseen key falls back to the mean over every completion.
    assert predictor.predict(make_request("chat", "gen")) == pytest.approx(1060.0 / 5)
    assert predictor.num_samples("sql/gen") == 3 and predictor.num_samples() == 5


def test_predictions_never_use_uncompleted_requests() -> None:
    predictor = HistoryOutputPredictor()
    predictor.observe(make_request(rid="done"), 40)
    before = predictor.predict(make_request())
    # Predicting (and so holding in flight) many requests, or a cancelled one with no output, changes nothing.
    for index in range(100):
        predictor.predict(make_request(rid=f"in-flight-{index}", prompt_tokens=5000))
    predictor.observe(make_request(rid="cancelled"), 0)
    assert predictor.predict(make_request()) == before == 40.0
    assert predictor.num_samples() == 1


def test_always_clipped_to_request_limit() -> None:
    predictor = HistoryOutputPredictor()
    predictor.observe(make_request(), 900)
    assert predictor.predict(make_request(max_output_tokens=64)) == 64.0
    assert predictor.predict(make_request(max_output_tokens=0)) == 1.0
    ratio = HistoryOutputPredictor(mode="ratio")
    ratio.observe(make_request(prompt_tokens=100), 1)
    assert ratio.predict(make_request(prompt_tokens=10)) == 1.0  # 0.1 clipped up to 1


def test_ratio_mode_scales_with_prompt() -> None:
    predictor = HistoryOutputPredictor(mode="ratio")
    predictor.observe(make_request(prompt_tokens=100), 50)
    predictor.observe(make_request(prompt_tokens=200), 100)
    assert predictor.predict(make_request(prompt_tokens=400)) == pytest.approx(200.0)


def test_min_samples_defers_to_fallback() -> None:
    predictor = HistoryOutputPredictor(min_samples=2)
    predictor.observe(make_request("a", "x"), 10)
    assert predictor.predict(make_request("a", "x")) == 128.0
    predictor.observe(make_request("b", "y"), 30)
    assert predictor.predict(make_request("a", "x")) == pytest.approx(20.0)  # global mean of 2


def test_bad_config_is_rejected() -> None:
    with pytest.raises(ConfigError):
        HistoryOutputPredictor(mode="median")
    with pytest.raises(ConfigError):
        HistoryOutputPredictor(default_tokens=0)


def test_keys_are_bounded_and_the_least_recently_observed_goes_first() -> None:
    predictor = HistoryOutputPredictor(max_keys=3)
    for stage in ("a", "b", "c"):
        predictor.observe(make_request(stage=stage), 10)
    predictor.observe(make_request(stage="a"), 10)  # "a" is now the most recently observed
    predictor.observe(make_request(stage="d"), 10)  # evicts "b"
    assert [predictor.num_samples(f"t/{stage}") for stage in "abcd"] == [2, 0, 1, 1]
    for k in range(1000):  # a client inventing stage names cannot grow the map
        predictor.observe(make_request(stage=f"x{k}"), 10)
    assert sum(predictor.num_samples(f"t/x{k}") > 0 for k in range(1000)) == 3
    assert predictor.num_samples() == 1005


def test_bucket_mode_learns_by_prompt_length_once_a_bucket_has_enough_samples() -> None:
    predictor = HistoryOutputPredictor(mode="bucket")
    short, long = make_request(prompt_tokens=100), make_request(prompt_tokens=3000)
    for index in range(BUCKET_MIN_SAMPLES):
        predictor.observe(short, 20)
        predictor.observe(long, 400)
        if index < BUCKET_MIN_SAMPLES - 1:  # not trusted yet: the key's mean
            assert predictor.predict(short) == pytest.approx(210.0)
    assert predictor.predict(short) == pytest.approx(20.0)
    assert predictor.predict(long) == pytest.approx(400.0)
    # A prompt length in a bucket with no samples: the key's mean; the same half-octave shares the bucket.
    assert predictor.predict(make_request(prompt_tokens=700)) == pytest.approx(210.0)
    assert prompt_bucket(100) == prompt_bucket(110) != prompt_bucket(150)
    # The mean mode ignores prompt length.
    plain = HistoryOutputPredictor()
    for _ in range(BUCKET_MIN_SAMPLES):
        plain.observe(short, 20)
        plain.observe(long, 400)
    assert plain.predict(short) == plain.predict(long) == pytest.approx(210.0)


@given(st.lists(st.tuples(st.integers(1, 40_000), st.integers(1, 4000)), min_size=1, max_size=60))
def test_bucket_predictions_stay_within_the_observed_range_and_the_limit(pairs: list[tuple[int, int]]) -> None:
    predictor = HistoryOutputPredictor(mode="bucket")
    for prompt, output in pairs:
        predictor.observe(make_request(prompt_tokens=prompt), output)
    outputs = [output for _, output in pairs]
    for prompt, _ in pairs:
        predicted = predictor.predict(make_request(prompt_tokens=prompt, max_output_tokens=5000))
        assert min(outputs) - 1e-6 <= predicted <= max(outputs) + 1e-6
        assert predictor.predict(make_request(prompt_tokens=prompt, max_output_tokens=7)) <= 7
