"""A ``JobRecord`` as one row of the SQL stores (SQLite and PostgreSQL share the layout): scalar columns
for what queries filter on, JSON text for ``stages`` and ``state``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from slosched.gateway.jobs.store.base import TERMINAL, JobRecord

COLUMNS = (
    "id",
    "tenant",
    "kind",
    "template",
    "status",
    "reason",
    "owner",
    "created_unix_s",
    "updated_unix_s",
    "slo_s",
    "finish_unix_s",
    "stages",
    "state",
)
COLUMN_LIST = ", ".join(COLUMNS)
# Sorted so the SQL text (and a prepared statement's plan) is the same on every run.
TERMINAL_LIST = tuple(sorted(TERMINAL))


def dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def record_row(record: JobRecord) -> tuple[Any, ...]:
    return (
        record.id,
        record.tenant,
        record.kind,
        record.template,
        record.status,
        record.reason,
        record.owner,
        record.created_unix_s,
        record.updated_unix_s,
        record.slo_s,
        record.finish_unix_s,
        dumps(record.stages),
        dumps(record.state),
    )


def row_record(row: Sequence[Any]) -> JobRecord:
    (job_id, tenant, kind, template, status, reason, owner, created, updated, slo, finish, stages, state) = row
    return JobRecord(
        id=job_id,
        tenant=tenant,
        kind=kind,
        template=template,
        status=status,
        reason=reason,
        owner=owner,
        created_unix_s=float(created),
        updated_unix_s=float(updated),
        slo_s=None if slo is None else float(slo),
        finish_unix_s=None if finish is None else float(finish),
        stages=orjson.loads(stages),
        state=orjson.loads(state),
    )


def oldest_first(records: list[JobRecord]) -> list[JobRecord]:
    return sorted(records, key=lambda r: (r.created_unix_s, r.id))
