"""relQueries over real tables: DuckDB table sources, prompt templates, token estimates and plans."""

from slosched.relquery.plan import RelQueryPlan, plan_records, plan_relquery
from slosched.relquery.source import TableRef, TableRows, read_rows
from slosched.relquery.template import PromptTemplate
from slosched.relquery.tokens import count_tokens

__all__ = [
    "PromptTemplate",
    "RelQueryPlan",
    "TableRef",
    "TableRows",
    "count_tokens",
    "plan_records",
    "plan_relquery",
    "read_rows",
]
