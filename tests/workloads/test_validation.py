"""``workloads._validation``: pydantic errors turned into ``ConfigError`` naming the field, and ``Params``'
typed reads (every error names the parameter; ``finish`` catches misspelt ones)."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field, TypeAdapter, ValidationError, field_validator

from slosched.core.errors import ConfigError
from slosched.workloads._validation import Params, config_error


class _Inner(BaseModel):
    rate: float = Field(gt=0)


class _Outer(BaseModel):
    name: str
    inner: _Inner
    items: list[int] = []

    @field_validator("name")
    @classmethod
    def _no_spaces(cls, value: str) -> str:
        if " " in value:
            raise ConfigError("name", "must not contain spaces")
        return value


class _A(BaseModel):
    kind: Literal["a"]
    x: int


class _B(BaseModel):
    kind: Literal["b"]
    y: int


_TAGGED: TypeAdapter[_A | _B] = TypeAdapter(Annotated[_A | _B, Field(discriminator="kind")])


def _error(data: Any) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        _Outer.model_validate(data)
    return caught.value


def test_nested_path_and_the_bad_value() -> None:
    error = config_error(_error({"name": "n", "inner": {"rate": -1}}), "workload")
    assert error.field == "workload.inner.rate"
    assert "greater than 0" in str(error) and "got -1" in str(error)


def test_missing_field_has_no_value_suffix() -> None:
    error = config_error(_error({"inner": {"rate": 1}}), "cfg")
    assert error.field == "cfg.name"
    assert "got" not in str(error)


def test_container_values_are_not_echoed() -> None:
    error = config_error(_error({"name": "n", "inner": [1, 2]}), "cfg")
    assert error.field == "cfg.inner" and "got" not in str(error)


def test_a_config_error_from_a_validator_keeps_its_field() -> None:
    error = config_error(_error({"name": "a b", "inner": {"rate": 1}}), "scenario")
    assert error.field == "scenario.name"
    assert str(error) == "scenario.name: must not contain spaces"


def test_skip_loc_and_empty_where() -> None:
    error = config_error(_error({"name": "n", "inner": {"rate": 0}}), "", skip_loc=1)
    assert error.field == "rate"


def test_a_discriminated_union_names_its_tag_and_skips_it() -> None:
    for data in ({"kind": "c"}, {"x": 1}):
        with pytest.raises(ValidationError) as caught:
            _TAGGED.validate_python(data)
        assert config_error(caught.value, "arrival").field == "arrival.kind"
    with pytest.raises(ValidationError) as caught:
        _TAGGED.validate_python({"kind": "a", "x": "q"})
    assert config_error(caught.value, "arrival").field == "arrival.a.x"
    assert config_error(caught.value, "arrival", skip_loc=1).field == "arrival.x"


def test_invalid_json_is_named_json() -> None:
    with pytest.raises(ValidationError) as caught:
        _Outer.model_validate_json("{not json")
    assert config_error(caught.value, "trace").field == "trace.json"


def test_long_values_are_cut() -> None:
    error = config_error(_error({"name": "n", "inner": {"rate": "x" * 1000}}), "w")
    assert len(str(error)) < 400


def test_params_typed_reads_and_defaults() -> None:
    params = Params("gen", {"rate": 2, "count": 3, "mode": "b", "label": "x", "extra": [1]})
    assert params.number("rate", 1.0) == 2.0
    assert params.integer("count", 1) == 3
    assert params.choice("mode", "a", ("a", "b")) == "b"
    assert params.text("label", "d") == "x"
    assert params.raw("extra") == [1]
    assert params.optional_number("slo_s") is None
    assert params.number("absent", 0.5) == 0.5
    assert params.number("zero_ok", 0.0, strict=False) == 0.0
    params.finish()


@pytest.mark.parametrize(
    ("read", "message"),
    [
        (lambda p: p.number("v", None), "gen.v: expected a number, got None"),
        (lambda p: p.number("flag", 1.0), "gen.flag: expected a number, got True"),
        (lambda p: p.number("v0", 1.0), "gen.v0: must be a finite number > 0.0, got 0"),
        (lambda p: p.number("neg", 1.0, strict=False), "gen.neg: must be a finite number >= 0.0, got -1"),
        (lambda p: p.number("inf", 1.0), "gen.inf: must be a finite number > 0.0, got inf"),
        (lambda p: p.integer("half", 1), "gen.half: expected an integer >= 1, got 1.5"),
        (lambda p: p.integer("flag", 1, minimum=0), "gen.flag: expected an integer >= 0, got True"),
        (lambda p: p.integer("v0", 1), "gen.v0: expected an integer >= 1, got 0"),
        (lambda p: p.text("empty", "d"), "gen.empty: expected a non-empty string, got ''"),
        (lambda p: p.choice("mode", "a", ("a", "b")), "gen.mode: got 'c'; allowed: a, b"),
    ],
)
def test_params_errors_name_the_parameter(read: Any, message: str) -> None:
    params = Params("gen", {"flag": True, "v0": 0, "neg": -1, "inf": math.inf, "half": 1.5, "empty": "", "mode": "c"})
    with pytest.raises(ConfigError) as error:
        read(params)
    assert str(error.value) == message


def test_finish_names_unknown_parameters_and_the_allowed_ones() -> None:
    params = Params("azure-conv", {"max_tokens": 8, "max_tokns": 9})
    params.integer("max_tokens", 2048)
    params.integer("max_input_tokens", 8000)
    with pytest.raises(ConfigError) as error:
        params.finish()
    assert str(error.value) == "azure-conv params: unknown ['max_tokns']; allowed: max_input_tokens, max_tokens"
    with pytest.raises(ConfigError, match=r"unknown \['a'\]; allowed: \(none\)"):
        Params("g", {"a": 1}).finish()
    Params("g", None).finish()


def test_params_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError, match="g params: expected a mapping, got list"):
        Params("g", [1, 2])  # type: ignore[arg-type]
