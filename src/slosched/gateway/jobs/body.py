"""Validation of job-API bodies: a job submission and a workflow stage, strictly, before anything runs.

Every number is finite and bounded (an ``slo_s`` of 1e306 or a ``max_tokens`` of 10**400 once left jobs
running forever), a relQuery's expanded prompts are sized without being rendered (rows render one at a
time as they are sent), and a stage is checked whole before any of its calls is accepted. Errors name the
field and never echo more than ~64 characters of the input.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError

from slosched.contract import reserved_xarg
from slosched.gateway.calls.call import CHAT, COMPLETIONS, Call, HttpError, SloHeaders, bad_request, parse_call
from slosched.policies.job import prefix_order

MAX_ROWS = 10_000
MAX_CALLS_PER_STAGE = 256
MAX_STAGES = 1_024
MAX_SLO_S = 1e6
MAX_PROMPT_BYTES = 32 << 20  # a relQuery's prompts across all rows, expanded
_MAX_ABS_NUMBER = 1e15  # any other number in a call body: finite, and no larger than any real setting
_MAX_DEPTH = 32
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def short(value: Any) -> str:
    """``repr`` cut to ~64 characters: an error may show what it refused, never echo a large input."""
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**60 else "<a huge integer>"
    return text if len(text) <= 64 else text[:61] + "..."


class JobSpec(BaseModel):
    """``POST /v1/jobs``. ``tenant`` may only repeat the caller's own (identity comes from the API key)."""

    model_config = _STRICT
    kind: Literal["workflow", "relquery"] = "workflow"
    slo_s: float | None = Field(default=None, gt=0, le=MAX_SLO_S)
    priority: float = Field(default=0.0, ge=-1e6, le=1e6)
    template: StrictStr = Field(default="", max_length=100_000)
    tenant: StrictStr | None = Field(default=None, min_length=1, max_length=128)
    rows: list[Any] | None = Field(default=None, min_length=1, max_length=MAX_ROWS)
    params: dict[str, Any] = Field(default_factory=dict)
    # The order rows are sent in (policies/job/prefix_order.py): as given, sorted for prefix reuse, or with
    # a record-form template's field lines reordered first. Results keep the rows' order either way.
    order: Literal["table", "rows", "fields"] = "table"


class StageSpec(BaseModel):
    """``POST /v1/jobs/{id}/stages``."""

    model_config = _STRICT
    name: StrictStr | None = Field(default=None, min_length=1, max_length=128)
    calls: list[Any] = Field(min_length=1, max_length=MAX_CALLS_PER_STAGE)
    final: StrictBool = False
    # "reject": an early 503 deadline_infeasible when the job layer finds the job cannot make its deadline
    # (gateway/dispatch/admission.py); "relegate": the stage runs as best effort.
    if_infeasible: Literal["relegate", "reject"] = "relegate"


_M = TypeVar("_M", bound=BaseModel)

_HINTS = {
    "rows": f"expected a list of 1..{MAX_ROWS} row objects",
    "calls": f"expected a list of 1..{MAX_CALLS_PER_STAGE} call objects",
    "kind": "expected one of ['workflow', 'relquery']",
    "order": "expected one of ['table', 'rows', 'fields']",
    "if_infeasible": "expected one of ['relegate', 'reject']",
    "slo_s": f"expected a number in (0, {MAX_SLO_S:g}] seconds",
    "priority": "expected a number in [-1e6, 1e6]",
    "final": "expected true or false",
    "params": "expected an object of OpenAI fields applied to every row's call",
}


def _validated(model: type[_M], body: Mapping[str, Any]) -> _M:
    try:
        return model.model_validate(body)
    except ValidationError as error:
        first = error.errors(include_url=False, include_input=False)[0]
        loc = [str(part) for part in first["loc"]]
        name = loc[0] if loc else "body"
        where = name + "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in loc[1:])
        hint = _HINTS.get(name, "") if len(loc) == 1 else ""
        raise bad_request(where, f"{first['msg']}{'; ' + hint if hint else ''}") from error


def parse_job(body: Mapping[str, Any], max_tokens: int) -> JobSpec:
    spec = _validated(JobSpec, body)
    if spec.kind == "relquery":
        if spec.rows is None:
            raise bad_request("rows", _HINTS["rows"])
        if not spec.template:
            raise bad_request("template", "a relquery needs a prompt template with {column} placeholders")
        check_numbers(spec.params, "params", max_tokens)
        if "prompt" in spec.params or "messages" in spec.params or "stream" in spec.params:
            raise bad_request("params", "'prompt', 'messages' and 'stream' are set by the gateway per row")
        reserved = reserved_xarg(spec.params.get("vllm_xargs"))
        if reserved is not None:
            raise bad_request(f"params.vllm_xargs.{short(reserved)}", "slosched_* fields are the gateway's to set")
        if spec.order == "fields" and record_lines(spec.template) is None:
            message = (
                "'fields' needs a template in record form: an instruction line, then one line per placeholder "
                "(e.g. 'Is the review positive?\\nTitle: {title}\\nReview: {review}'); use 'rows' for this one"
            )
            raise bad_request("order", message)
        size = expanded_bytes(spec.template, spec.rows)
        if size > MAX_PROMPT_BYTES:
            message = f"rows: the template expands to {size} bytes of prompts; at most {MAX_PROMPT_BYTES}"
            raise HttpError(413, "prompts_too_large", message)
    elif spec.rows is not None or spec.params or spec.order != "table":
        field = "rows" if spec.rows is not None else "params" if spec.params else "order"
        raise bad_request(field, "only a relquery takes rows, params and order")
    return spec


def parse_stage(body: Mapping[str, Any], default_name: str) -> tuple[str, list[dict[str, Any]], bool, bool]:
    """(name, call bodies, final, whether an infeasible stage is refused rather than relegated)."""
    spec = _validated(StageSpec, body)
    return spec.name or default_name, spec.calls, spec.final, spec.if_infeasible == "reject"


def check_numbers(value: Any, where: str, max_tokens: int, depth: int = 0) -> None:
    """Every number in a call body finite and bounded; the token limits within the backends' model length."""
    if depth > _MAX_DEPTH:
        raise bad_request(where, f"nested deeper than {_MAX_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            check_numbers(item, f"{where}.{key}", max_tokens, depth + 1)
            if key in ("max_tokens", "max_completion_tokens") and _is_number(item) and item > max_tokens:
                raise bad_request(f"{where}.{key}", f"expected an integer in [1, {max_tokens}], got {short(item)}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_numbers(item, f"{where}[{index}]", max_tokens, depth + 1)
    elif _is_number(value) and not _bounded(value):
        raise bad_request(where, f"expected a finite number of magnitude <= {_MAX_ABS_NUMBER:g}, got {short(value)}")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _bounded(value: float) -> bool:
    if isinstance(value, int):  # an int of 400 digits has no float: compare as ints
        return abs(value) <= int(_MAX_ABS_NUMBER)
    return math.isfinite(value) and abs(value) <= _MAX_ABS_NUMBER


def stage_calls(
    bodies: list[Any],
    slo: SloHeaders,
    now_s: float,
    default_max_tokens: int,
    max_tokens: int,
    models: Mapping[str, int] | None = None,
) -> list[Call]:
    """Parse every call of a stage (nothing is accepted until all of them passed); ``models`` as in
    ``parse_call`` (an unknown model is a 404 naming the call, before any call of the stage runs)."""
    calls: list[Call] = []
    for index, body in enumerate(bodies):
        where = f"calls[{index}]"
        if not isinstance(body, dict):
            raise bad_request(where, "expected an object with 'prompt' or 'messages'")
        check_numbers(body, where, max_tokens)
        path = CHAT if "messages" in body else COMPLETIONS
        try:
            calls.append(parse_call(path, {**body, "stream": False}, slo, now_s, default_max_tokens, models))
        except HttpError as error:
            raise HttpError(error.status, error.code, f"{where}.{error.message}", error.retry_after_s) from None
    return calls


def _cell(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def fill_template(template: str, row: Any, index: int) -> str:
    """``{column}`` placeholders only (no attribute or index lookups: a template cannot reach objects)."""
    if not isinstance(row, dict):
        raise bad_request(f"rows[{index}]", "expected an object of column values")

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in row:
            raise bad_request(f"rows[{index}]", f"missing column {name[:64]!r} used by the template")
        return _cell(row[name])

    return _PLACEHOLDER.sub(value, template)


def expanded_bytes(template: str, rows: list[Any]) -> int:
    """UTF-8 bytes of every row's prompt, without rendering any; checks each row has the template's columns."""
    names = Counter(_PLACEHOLDER.findall(template))
    static = len(_PLACEHOLDER.sub("", template).encode())
    total = 0
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise bad_request(f"rows[{index}]", "expected an object of column values")
        total += static
        for name, count in names.items():
            if name not in row:
                raise bad_request(f"rows[{index}]", f"missing column {name[:64]!r} used by the template")
            total += count * len(_cell(row[name]).encode())
        if total > MAX_PROMPT_BYTES:
            break  # already too large: stop measuring
    return total


@dataclass(slots=True)
class RowPlan:
    """A relQuery's submission; ``body(i)`` renders row ``i``'s call only when it is about to be sent, and
    ``sequence()`` is the order rows are sent in (``order``; computed once, from the rows' field values)."""

    template: str
    rows: list[dict[str, Any]]
    params: dict[str, Any]
    order: str = "table"
    _sent_template: str | None = None

    def body(self, index: int) -> dict[str, Any]:
        prompt = fill_template(self.sent_template(), self.rows[index], index)
        return {**self.params, "prompt": prompt, "stream": False}

    def sent_template(self) -> str:
        """The template as sent: with ``fields``, its field lines in ``prefix_order.field_order``'s order."""
        if self._sent_template is None:
            self._sent_template = self.template
            lines = record_lines(self.template) if self.order == "fields" else None
            if lines is not None:
                head, fields, tail = lines
                values = [[fill_template(line, row, index) for index, row in enumerate(self.rows)] for line in fields]
                order = prefix_order.field_order(values, len)  # characters: the gateway counts no tokens here
                self._sent_template = "\n".join([*head, *(fields[index] for index in order), *tail])
        return self._sent_template

    def sequence(self) -> list[int]:
        if self.order == "table":
            return list(range(len(self.rows)))
        names = _PLACEHOLDER.findall(self.sent_template())
        return prefix_order.row_order([tuple(_cell(row.get(name)) for name in names) for row in self.rows])

    def as_state(self) -> dict[str, Any]:
        return {"template": self.template, "rows": self.rows, "params": self.params, "order": self.order}


def record_lines(template: str) -> tuple[list[str], list[str], list[str]] | None:
    """(instruction lines, field lines, trailing lines) of a record-form template: after at least one line
    without a placeholder, a run of lines holding exactly one placeholder each; None otherwise."""
    lines = template.split("\n")
    holders = [len(_PLACEHOLDER.findall(line)) for line in lines]
    placed = [index for index, count in enumerate(holders) if count]
    if not placed or placed[0] == 0 or any(count != 1 for count in holders[placed[0] : placed[-1] + 1]):
        return None
    return lines[: placed[0]], lines[placed[0] : placed[-1] + 1], lines[placed[-1] + 1 :]
