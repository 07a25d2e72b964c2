"""The small Qwen2.5-Coder models of SABER's reproduction: shapes from their public configs, KV size, speed."""

from __future__ import annotations

import pytest

from slosched.perf.hardware import model_facts
from slosched.perf.roofline import RooflineModel

# (layers, hidden, heads, kv_heads, head_dim, intermediate, vocab) from the models' config.json
CONFIGS = {
    "Qwen2.5-Coder-1.5B": (28, 1536, 12, 2, 128, 8960, 151936),
    "Qwen2.5-Coder-3B": (36, 2048, 16, 2, 128, 11008, 151936),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_shape_matches_the_public_config_and_parameter_count(name: str) -> None:
    facts = model_facts(name)
    layers, hidden, heads, kv_heads, head_dim, intermediate, vocab = CONFIGS[name]
    assert (facts.layers, facts.hidden, facts.heads, facts.kv_heads) == (layers, hidden, heads, kv_heads)
    assert (facts.head_dim, facts.intermediate, facts.vocab) == (head_dim, intermediate, vocab)
    assert facts.mlp_matrices == 3  # gated SiLU MLP
    # Tied embeddings: the body plus one vocabulary matrix is the published parameter count.
    counted = facts.layers * facts.layer_linear_params + facts.vocab * facts.hidden
    assert counted == pytest.approx(facts.num_params, rel=0.04)


def test_kv_bytes_per_token_and_speed_order() -> None:
    small = RooflineModel.build("A100-40G", "Qwen2.5-Coder-1.5B")
    medium = RooflineModel.build("A100-40G", "Qwen2.5-Coder-3B")
    large = RooflineModel.build("A100-40G", "Qwen2.5-Coder-7B")
    assert small.kv_bytes_per_token == 2 * 28 * 2 * 128 * 2  # K and V, layers, KV heads, head dim, bf16
    assert medium.kv_bytes_per_token == 2 * 36 * 2 * 128 * 2
    alone = [1.0 / model.step_time_s(0, 0, 1, 500) for model in (small, medium, large)]
    assert alone[0] > alone[1] > alone[2]
    # One request alone on the A100-40G outruns the fastest per-task SLA demand of the code mixes (92 tok/s).
    assert alone[0] > 100.0
    # Full memory holds far more than SABER's regime needs: the bench limits KV explicitly.
    assert small.num_kv_blocks(0.9) * 16 > 1_000_000
