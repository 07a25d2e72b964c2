"""SABER with no configured speed model: the plugin calibrates one from its own step observations.

SABER's parts (ordering ``saber``, admission ``saber``, both in the preset ``saber``) need ``f(L)``, the
tokens/s each request gets when ``L`` run together. When the plugin configuration names a SABER part but
gives it neither ``profile`` nor ``speed`` (``SaberScheduler`` with no ``params``, or ``{"preset":
"saber"}``), the plugin derives ``f`` from its online step-time model (the one it exports as
``step_model``). A decode step of ``L`` requests with mean context ``c`` takes
``t(L) = c0 + b*L`` with ``b = decode_s_per_seq + context_s_per_token * c``, and each request gets one
token per step, so ``f(L) = 1 / t(L)``: exactly a USL model with ``lam = 1/(c0 + b)``,
``sigma = b/(c0 + b)``, ``kappa = 0``. It starts from the step model's prior and is refreshed every
``observe_interval_s`` from the fitted coefficients, in place (the policy keeps its queue state and RNG);
the state export shows it as ``plugin.saber_speed``.

Limits: the model sees step times only, so prefill interference and preemptions are not in ``f``
(optimistic under prefill-heavy load), and until decode steps at several batch sizes were observed the
per-sequence cost stays near the prior's. A measured profile (``params.profile``, from
``slosched.tuning.saber_profile``) or inline ``params.speed`` is used as is, with no calibration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from slosched.perf.linear import LinearStepCoefficients
from slosched.perf.speed_models import UslSpeedModel
from slosched.policies.engine.base import EnginePolicy
from slosched.vllm_ext.config import PolicyChoice

SABER = "saber"
SPEED_KEYS = ("profile", "speed")
DEFAULT_CONTEXT_TOKENS = 256.0  # mean decode context assumed before any request ran


def speed_from_step_model(coefficients: LinearStepCoefficients, context_tokens: float) -> UslSpeedModel:
    """Per-request decode speed implied by the linear step-time model at ``context_tokens`` per request."""
    per_seq = coefficients.decode_s_per_seq + coefficients.context_s_per_token * max(context_tokens, 0.0)
    alone = max(coefficients.c0_s + per_seq, 1e-9)  # NNLS coefficients are >= 0; never divide by 0
    return UslSpeedModel(lam=1.0 / alone, sigma=per_seq / alone, kappa=0.0)


def speed_dict(model: UslSpeedModel) -> dict[str, Any]:
    return {"kind": model.kind, "lam": model.lam, "sigma": model.sigma, "kappa": model.kappa}


def calibrated_parts(choice: PolicyChoice) -> tuple[str, ...]:
    """Which of the policy's parts (``ordering``, ``admission``) are SABER parts with no speed model."""
    if choice.preset is not None:
        return ("ordering", "admission") if choice.preset == SABER and _lacks_speed(choice.params) else ()
    parts = (
        ("ordering", choice.ordering, choice.ordering_params),
        ("admission", choice.admission, choice.admission_params),
    )
    return tuple(part for part, name, params in parts if name == SABER and _lacks_speed(params))


def _lacks_speed(params: Mapping[str, Any]) -> bool:
    return not any(key in params for key in SPEED_KEYS)


def with_speed(choice: PolicyChoice, parts: Iterable[str], model: UslSpeedModel) -> PolicyChoice:
    """``choice`` with ``model`` as the inline ``speed`` of each of ``parts`` (so the policy builds)."""
    speed = {"speed": speed_dict(model)}
    parts = set(parts)
    if not parts:
        return choice
    if choice.preset is not None:
        return replace(choice, params={**choice.params, **speed})
    ordering = {**choice.ordering_params, **speed} if "ordering" in parts else choice.ordering_params
    admission = {**choice.admission_params, **speed} if "admission" in parts else choice.admission_params
    return replace(choice, ordering_params=ordering, admission_params=admission)


@dataclass(slots=True)
class SaberCalibration:
    """Keeps the speed model of a policy's calibrated SABER parts equal to the step model's ``f``.

    Invariant: after ``refresh``, every part in ``parts`` has ``model == self.model`` and
    ``max_speed == self.model.speed(1)`` (the two attributes SABER's parts read)."""

    parts: tuple[str, ...]
    model: UslSpeedModel
    context_tokens: float = DEFAULT_CONTEXT_TOKENS
    num_refreshes: int = 0

    def refresh(self, policy: EnginePolicy, coefficients: LinearStepCoefficients, context_tokens: float | None) -> None:
        if context_tokens is not None:
            self.context_tokens = context_tokens
        self.model = speed_from_step_model(coefficients, self.context_tokens)
        for part in self.parts:
            target = getattr(policy, part)
            target.model = self.model
            target.max_speed = self.model.speed(1.0)
        self.num_refreshes += 1

    def to_dict(self) -> dict[str, Any]:
        return {
            **speed_dict(self.model),
            "parts": list(self.parts),
            "context_tokens": self.context_tokens,
            "num_refreshes": self.num_refreshes,
        }
