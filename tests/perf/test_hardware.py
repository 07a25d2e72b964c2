from __future__ import annotations

import dataclasses

import pytest

from slosched.core.errors import UnknownNameError
from slosched.perf.hardware import gpu_facts, gpu_names, model_facts, model_names


def test_names_cover_bundled_data() -> None:
    assert {"A100-80G", "A100-40G", "H100", "A6000", "L40S", "A40"} <= set(gpu_names())
    assert {"Llama-3-8B", "Llama-2-70B", "Llama-3.1-70B", "OPT-13B"} <= set(model_names())
    assert not any(name.startswith("_") for name in gpu_names() + model_names())


def test_a100_alias_is_the_80gb_part() -> None:
    assert gpu_facts("A100") == gpu_facts("A100-80G")
    assert gpu_facts("A100").name == "A100-80G"
    assert gpu_facts("A100").memory_bytes == 80e9


def test_facts_are_frozen_and_slotted() -> None:
    facts = gpu_facts("H100")
    with pytest.raises(dataclasses.FrozenInstanceError):
        facts.fp16_flops = 1.0  # type: ignore[misc]
    assert not hasattr(facts, "__dict__")
    assert not hasattr(model_facts("Llama-3-8B"), "__dict__")


@pytest.mark.parametrize(("lookup", "field"), [(gpu_facts, "gpu"), (model_facts, "model")])
def test_unknown_name_names_field_and_known(lookup: object, field: str) -> None:
    with pytest.raises(UnknownNameError) as info:
        lookup("TPUv5")  # type: ignore[operator]
    assert info.value.field == field
    assert info.value.known
    assert field in str(info.value) and "TPUv5" in str(info.value)


@pytest.mark.parametrize("name", model_names())
def test_architecture_matches_published_parameter_count(name: str) -> None:
    facts = model_facts(name)
    body = facts.linear_params
    # Embeddings tied or not: the dense body plus one or two vocab matrices is within 4 % of params_b.
    closest = min(abs(body + k * facts.lm_head_params - facts.num_params) for k in (1, 2))
    assert closest / facts.num_params < 0.04


def test_gated_mlp_inference() -> None:
    assert model_facts("Llama-2-7B").mlp_matrices == 3
    assert model_facts("OPT-13B").mlp_matrices == 2
    assert model_facts("Llama-3-8B").head_dim == 128
    assert model_facts("Llama-3-8B").kv_dim == 1024
