"""Bundled data: workloads.json facts and the Azure 2023 traces."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pytest

from slosched.core.errors import ConfigError, UnknownNameError
from slosched.workloads.bundled import (
    AZURE_TRACE_NAMES,
    azure_trace,
    parse_azure_csv,
    workload_facts,
    workload_section,
)


@pytest.mark.parametrize("name", AZURE_TRACE_NAMES)
def test_azure_trace_columns(name: str) -> None:
    trace = azure_trace(name)
    assert len(trace) > 5000
    assert len(trace.input_tokens) == len(trace.output_tokens) == len(trace)
    assert trace.arrival_s[0] == 0.0
    assert np.all(np.diff(trace.arrival_s) >= 0)
    assert 3000 < trace.duration_s < 4000  # about one hour
    assert trace.input_tokens.min() >= 1 and trace.output_tokens.min() >= 1
    assert trace.input_tokens.dtype == np.int64


def test_azure_trace_matches_published_rates() -> None:
    facts = workload_section("azure_llm_2023")
    conv = azure_trace("azure-conv")
    assert (len(conv) - 1) / conv.duration_s == pytest.approx(facts["conversation"]["rate_rps"], rel=0.02)
    assert np.median(conv.input_tokens) == pytest.approx(facts["conversation"]["in"]["p50"], rel=0.05)


def test_azure_trace_is_cached_and_read_only() -> None:
    trace = azure_trace("code")
    assert azure_trace("azure-code") is trace
    with pytest.raises(ValueError):
        trace.arrival_s[0] = 1.0


def test_unknown_trace_lists_names() -> None:
    with pytest.raises(UnknownNameError, match="code, conv"):
        azure_trace("chat")


def test_attribution_ships_with_the_traces() -> None:
    text = resources.files("slosched.workloads").joinpath("data/traces/ATTRIBUTION.md").read_text("utf-8")
    assert "CC-BY 4.0" in text and "Splitwise" in text


def test_parse_azure_csv_keeps_sub_second_precision() -> None:
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n"
    text += "2023-11-16 18:17:04.0319600,3180,8\n2023-11-16 18:18:04.0319601,5,1\n"
    trace = parse_azure_csv(text, "tiny")
    assert trace.arrival_s.tolist() == pytest.approx([0.0, 0.052, 60.0520001], abs=1e-9)
    assert trace.input_tokens.tolist() == [4808, 3180, 5]
    assert trace.output_tokens.tolist() == [10, 8, 1]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("time,a,b\n", "header"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,1\n", "row 1"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,x,1\n", "unparseable"),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,1,1\n2023-11-16 18:17:02,1,1\n",
            "time order",
        ),
    ],
)
def test_parse_azure_csv_rejects_bad_files(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        parse_azure_csv(text, "bad")


def test_workload_facts_are_read_only() -> None:
    facts = workload_facts()
    with pytest.raises(TypeError):
        facts["relquery"] = {}  # type: ignore[index]
    tasks = workload_section("code_assistant", "tasks")
    assert tasks["code_qna"]["slo_s"] == 1
    with pytest.raises(UnknownNameError, match="code_assistant"):
        workload_section("code_assistent")
    with pytest.raises(ConfigError, match="not a section"):
        workload_section("code_assistant", "tasks", "code_qna", "slo_s")
