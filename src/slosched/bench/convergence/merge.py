"""``python -m slosched.bench.convergence.merge RUN.json [...]``: merge the JSON that runs of ``slosched bench
convergence --json`` printed into its page (``report.merged``): a ladder climbed in another sitting, another
worktree or on another machine joins the page without climbing the other workloads again."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from slosched.bench.convergence.report import PAGE, merged, read_results, write_page


def read_run(path: Path) -> dict[str, Any]:
    """One run's printed JSON; a ``ValueError`` naming the file when it is not that."""
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not a readable JSON file ({error})") from error
    if not isinstance(run, dict) or not isinstance(run.get("workloads"), dict) or "rungs" not in run:
        raise ValueError(f"{path}: not the JSON of `slosched bench convergence`")
    return run


def main(argv: list[str] | None = None) -> int:
    """Merge runs' printed JSON (in order, later runs winning per workload) into the page and its JSON."""
    parser = argparse.ArgumentParser(prog="python -m slosched.bench.convergence.merge", description=main.__doc__)
    parser.add_argument("runs", nargs="+", type=Path, help="the JSON `slosched bench convergence --json` printed")
    parser.add_argument("--page", type=Path, default=PAGE, help=f"the page to write (default {PAGE})")
    args = parser.parse_args(argv)
    try:
        runs = [read_run(path) for path in args.runs]  # all read before the page changes
    except ValueError as error:
        print(f"error: runs: {error}", file=sys.stderr)
        return 2
    try:
        figures = merged(read_results(args.page), runs[0])  # argparse asks for at least one run
    except ValueError as error:
        print(f"error: --page: the figures beside {args.page} are not readable JSON ({error})", file=sys.stderr)
        return 2
    for run in runs[1:]:
        figures = merged(figures, run)
    print(write_page(args.page, figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
