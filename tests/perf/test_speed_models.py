import math
from pathlib import Path

import numpy as np
import pytest

from slosched.core.errors import ConfigError
from slosched.perf.speed_models import (
    LinearSpeedModel,
    SpeedProfile,
    SpeedSample,
    UslSpeedModel,
    fit_linear,
    fit_logistic,
    fit_profile,
    fit_usl,
    speed_model_from_dict,
)


def _usl_samples(lam: float, sigma: float, kappa: float, noise: float, seed: int = 0) -> list[SpeedSample]:
    rng = np.random.default_rng(seed)
    truth = UslSpeedModel(lam, sigma, kappa)
    levels = rng.integers(1, 121, size=1000)
    return [SpeedSample(float(level), truth.speed(float(level)) * float(rng.lognormal(0.0, noise))) for level in levels]


def test_usl_formula_is_the_per_request_share_of_usl_throughput() -> None:
    model = UslSpeedModel(lam=100.0, sigma=0.1, kappa=0.001)
    assert model.speed(1.0) == 100.0
    assert model.speed(10.0) == pytest.approx(100.0 / (1 + 0.1 * 9 + 0.001 * 10 * 9))


@pytest.mark.parametrize(("lam", "sigma", "kappa"), [(87.0, 0.04, 5e-5), (120.0, 0.01, 4e-4)])
def test_usl_fit_recovers_known_parameters(lam: float, sigma: float, kappa: float) -> None:
    fit = fit_usl(_usl_samples(lam, sigma, kappa, noise=0.02))
    model = fit.model
    assert isinstance(model, UslSpeedModel)
    assert model.lam == pytest.approx(lam, rel=0.03)
    assert model.sigma == pytest.approx(sigma, rel=0.15, abs=2e-3)
    assert model.kappa == pytest.approx(kappa, rel=0.15, abs=2e-5)
    assert fit.r2 > 0.97


def test_weaker_forms_fit_usl_data_worse() -> None:
    samples = _usl_samples(87.0, 0.04, 5e-5, noise=0.02)
    usl, linear, logistic = fit_usl(samples), fit_linear(samples), fit_logistic(samples)
    assert usl.r2 > logistic.r2 - 1e-9 and usl.r2 > linear.r2
    assert linear.r2 < 0.95
    for fit in (usl, linear, logistic):
        assert all(math.isfinite(fit.model.speed(x)) and fit.model.speed(x) >= 0 for x in (1.0, 50.0, 500.0))


def test_profile_round_trips_through_json(tmp_path: Path) -> None:
    profile = fit_profile(_usl_samples(87.0, 0.04, 5e-5, noise=0.05), meta={"client": "test"})
    path = tmp_path / "p" / "profile.json"
    profile.save(path)
    loaded = SpeedProfile.load(path)
    assert loaded.num_samples == 1000 and loaded.meta == {"client": "test"}
    for kind in ("usl", "linear", "logistic"):
        assert loaded.model(kind) == profile.model(kind)
        assert loaded.fits[kind].r2 == profile.fits[kind].r2


def test_bad_input_is_named() -> None:
    with pytest.raises(ConfigError, match=r"at least 4"):
        fit_usl([SpeedSample(1.0, 10.0)])
    with pytest.raises(ConfigError, match=r"concurrency must be >= 1"):
        fit_usl([SpeedSample(0.5, 10.0)] * 5)
    with pytest.raises(ConfigError, match=r"speed.kind.*allowed"):
        speed_model_from_dict({"kind": "cubic"})
    with pytest.raises(ConfigError, match=r"expected coefficients"):
        speed_model_from_dict({"kind": "usl", "lam": 1.0})
    with pytest.raises(ConfigError, match=r"f\(1\) must be > 0"):
        speed_model_from_dict({"kind": "linear", "intercept": -1.0, "slope": 0.0})
    with pytest.raises(ConfigError, match=r"this profile has"):
        SpeedProfile({}, 0).model("usl")
    with pytest.raises(ConfigError, match=r"cannot read"):
        SpeedProfile.load(Path("/nonexistent/profile.json"))
    assert speed_model_from_dict({"kind": "linear", "intercept": 10, "slope": -1}) == LinearSpeedModel(10.0, -1.0)
