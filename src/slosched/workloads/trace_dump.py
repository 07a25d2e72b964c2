"""Writing jobs as JSONL trace lines (the formats are described in ``trace_io``).

Optional fields equal to their defaults are left out, so lines stay short and hand-editable; a job
whose shape its kind's line cannot describe (a ``relquery`` whose calls do not share one template
prefix, a ``single`` with two calls) is refused rather than written lossily.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from slosched.core.errors import ConfigError
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec


def job_to_line(job: JobSpec) -> str:
    """One JSONL line (no newline) that ``trace_io.job_from_line`` turns back into an equal job."""
    return json.dumps(job_to_dict(job), separators=(",", ":"), default=_plain)


def _plain(value: Any) -> Any:
    # numpy scalars sneak in from vectorised generators; JSON only knows Python numbers.
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} to a trace")


def job_to_dict(job: JobSpec) -> dict[str, Any]:
    if job.kind == JobKind.SINGLE:
        return _single(job)
    if job.kind == JobKind.RELQUERY:
        return _relquery(job)
    head = _head(job)
    head["stages"] = [_stage(stage) for stage in job.stages]
    return head


def _head(job: JobSpec) -> dict[str, Any]:
    head: dict[str, Any] = {"id": job.id, "kind": job.kind.value, "arrival_s": job.arrival_s}
    if job.slo_s is not None:
        head["slo_s"] = job.slo_s
    if job.template:
        head["template"] = job.template
    if job.tenant != "default":
        head["tenant"] = job.tenant
    if job.ttft_slo_s is not None:
        head["ttft_slo_s"] = job.ttft_slo_s
    if job.tpot_slo_s is not None:
        head["tpot_slo_s"] = job.tpot_slo_s
    return head


def _call(call: CallSpec) -> dict[str, Any]:
    fields: dict[str, Any] = {"input_tokens": call.input_tokens, "output_tokens": call.output_tokens}
    if call.max_output_tokens is not None:
        fields["max_output_tokens"] = call.max_output_tokens
    if call.prefix_key is not None:
        fields["prefix_key"] = call.prefix_key
    if call.prefix_tokens != 0:
        fields["prefix_tokens"] = call.prefix_tokens
    if call.session_id is not None:
        fields["session_id"] = call.session_id
    if call.group_key is not None:
        fields["group_key"] = call.group_key
    if call.group_tokens:
        fields["group_tokens"] = call.group_tokens
    return fields


def _stage(stage: StageSpec) -> dict[str, Any]:
    fields: dict[str, Any] = {"name": stage.name}
    if stage.calls:
        fields["calls"] = [_call(call) for call in stage.calls]
    if stage.after is not None:
        fields["after"] = list(stage.after)
    if stage.tool_duration_s != 0:
        fields["tool_duration_s"] = stage.tool_duration_s
    return fields


def _refuse(job: JobSpec, reason: str) -> ConfigError:
    return ConfigError(f"job {job.id!r}", f"cannot be written as a {job.kind.value!r} line: {reason}")


def _single(job: JobSpec) -> dict[str, Any]:
    if len(job.stages) != 1 or len(job.stages[0].calls) != 1:
        raise _refuse(job, "it needs exactly one stage with one call (write it as a workflow)")
    stage = job.stages[0]
    if stage.after is not None or stage.tool_duration_s != 0:
        raise _refuse(job, "its stage has after or tool_duration_s (write it as a workflow)")
    fields = _head(job)
    fields.update(_call(stage.calls[0]))
    if stage.name != (job.template or "call"):
        fields["stage"] = stage.name
    return fields


def _relquery(job: JobSpec) -> dict[str, Any]:
    if len(job.stages) != 1 or job.stages[0].name != "rows" or not job.stages[0].calls:
        raise _refuse(job, "it needs exactly one stage named 'rows' with at least one call")
    stage = job.stages[0]
    if stage.after is not None or stage.tool_duration_s != 0:
        raise _refuse(job, "its stage has after or tool_duration_s")
    calls = stage.calls
    template_tokens, max_output = calls[0].prefix_tokens, calls[0].max_output_tokens
    key = f"{job.id}/template"
    for call in calls:
        if call.prefix_key != key or call.prefix_tokens != template_tokens or call.session_id is not None:
            raise _refuse(job, f"every call needs prefix_key {key!r}, equal prefix_tokens and no session_id")
        if call.max_output_tokens != max_output:
            raise _refuse(job, "every call needs the same max_output_tokens")
    fields = _head(job)
    fields["template_tokens"] = template_tokens
    fields["rows"] = [_row(call, template_tokens) for call in calls]
    if max_output is not None:
        fields["max_output_tokens"] = max_output
    return fields


def _row(call: CallSpec, template_tokens: int) -> dict[str, Any]:
    row: dict[str, Any] = {"input_tokens": call.input_tokens - template_tokens, "output_tokens": call.output_tokens}
    if call.group_key is not None:
        row["group"] = call.group_key
    if call.group_tokens:
        row["group_tokens"] = call.group_tokens
    return row
