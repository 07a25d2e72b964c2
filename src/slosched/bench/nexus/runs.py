"""``slosched bench nexus``: NexusSched (LENS + PRISM) on the scoreboard (DESIGN section 9).

Per setting (``setup``: ShareGPT on the heterogeneous cluster is the headline; full runs add FlowGPT
and Summarization on 2x H100):

* **SLO capacity** (>= 90% and >= 95% of jobs meeting their token SLOs, bisection to 2%, median over seeds
  with the min-max spread) of the strongest-baseline candidates (``evaluation/baseline_plan.py``: six
  routers x ``chunked-fcfs`` with static token budgets and ``static-concurrency`` with static caps, in rounds),
  of ``prism+lens``, its ablations and the paper's baselines.
* **Overload**: attainment and goodput at 0.5x-2x the strongest baseline's capacity.
* **Cold start** (its own table): the same capacities with no warm-up prefix, so the step-time model
  starts from its deliberately bad guess.
* **Model accuracy** (held-out R^2 of the online step model per hardware) and **zero-config** (an
  unprofiled H100 joins a loaded cluster), from ``experiments``.

JSON (last line with ``--json``): the headline setting's ``baselines`` (policy -> SLO capacity),
``strongest_baseline``, ``ratio_vs_strongest``, ``ratio_vs_paper_baseline``, ``seeds``, ``num_jobs``,
``goodput_1.5x`` / ``goodput_2x``; ``settings_results`` (the same per setting), ``cold_start``,
``model_r2``, ``zero_config_converge_s`` and ``settings``. The full run writes docs/results/nexus.md;
``SLOSCHED_NEXUS_SAVE=FILE`` also pickles the run's objects there, so the report can be re-rendered from it.
"""

from __future__ import annotations

import os
import pickle
import resource
import time
from pathlib import Path
from typing import Any

from slosched.bench.nexus.experiments import HARDWARE, miss_breakdown, model_accuracy, zero_config
from slosched.bench.nexus.setup import (
    FLOWGPT_NOTE,
    FULL_SETTINGS,
    PAPER_BASELINE,
    PAPER_POLICY,
    QUICK_SETTINGS,
    Setting,
    baseline_plan,
    paper_candidates,
)
from slosched.core.errors import ConfigError
from slosched.evaluation.formatting import print_figures
from slosched.evaluation.runners import run_tasks
from slosched.evaluation.scoreboard import LOADS, Scoreboard, cold_start, evaluate
from slosched.evaluation.scoreboard_report import print_serving
from slosched.evaluation.sizing import PREFIX_RULE
from slosched.evaluation.task_cache import TALLY

RESULTS_DIR = Path("docs/results")  # relative to the working directory, like the other benches
QUICK_SEEDS = (1, 2)
FULL_SEEDS = (1, 2, 3, 4, 5)


def score(setting: Setting, quick: bool, seeds: tuple[int, ...]) -> tuple[Scoreboard, Scoreboard]:
    """(warm scoreboard, cold-start scoreboard of the paper policy and the strongest baseline)."""
    bench = setting.workbench()
    candidates = paper_candidates(quick)
    board = evaluate(
        bench,
        seeds,
        candidates,
        baseline_plan(quick),
        setting.guess,
        LOADS,
        (PAPER_POLICY, PAPER_BASELINE),
        converge_labels=[PAPER_POLICY],
    )
    strongest = board.baselines[board.strongest].candidate
    paper = next(candidate for candidate in candidates if candidate.label == PAPER_POLICY)
    cold = cold_start(bench, [paper, strongest], seeds, max(board.capacity_of(board.strongest), 1e-3))
    return board, cold


def diagnose(setting: Setting, board: Scoreboard) -> dict[str, Any]:
    """TTFT / TPOT misses of the paper policy, the strongest baseline and the paper's baseline at 2x the
    strongest baseline's capacity (one seed): what the overload losses are made of."""
    every = {**board.baselines, **board.others}
    labels = dict.fromkeys((PAPER_POLICY, board.strongest, PAPER_BASELINE))
    candidates = [every[label].candidate for label in labels]
    return miss_breakdown(setting.workbench(), candidates, 2.0 * board.capacity_of(board.strongest))


def _accuracy_task(item: tuple[tuple[str, int], bool]) -> dict[str, Any]:
    return model_accuracy(*item)


def _zero_task(quick: bool) -> dict[str, Any]:
    return zero_config(quick)


def board_figures(board: Scoreboard) -> dict[str, Any]:
    """The issue-13 fields of one setting plus goodput medians at 1.5x and 2x the strongest baseline."""
    figures = board.as_json(PAPER_POLICY, PAPER_BASELINE)
    for load in (1.5, 2.0):
        figures[f"goodput_{load:g}x"] = {
            label: per_load[load][1].median for label, per_load in board.overload.items() if load in per_load
        }
    return figures


def headline(boards: list[Scoreboard], colds: list[Scoreboard]) -> dict[str, Any]:
    """The JSON figures: the headline setting's at the top level, every setting under its label."""
    per_setting = {board.workbench: board_figures(board) for board in boards}
    top = per_setting[boards[0].workbench]
    keys = (
        "baselines",
        "strongest_baseline",
        "paper_policy",
        "ratio_vs_strongest",
        "paper_baseline",
        "ratio_vs_paper_baseline",
        "seeds",
        "num_jobs",
        "goodput_1.5x",
        "goodput_2x",
    )
    figures: dict[str, Any] = {key: top[key] for key in keys if key in top}
    figures["capacity"] = {
        label: top["capacity"][label] for label in (PAPER_POLICY, top["strongest_baseline"], PAPER_BASELINE)
    }
    figures["settings_results"] = per_setting
    figures["cold_start"] = {
        cold.workbench: {label: result.capacity[0.9].as_json() for label, result in cold.others.items()}
        for cold in colds
    }
    return figures


SAVE_ENV = "SLOSCHED_NEXUS_SAVE"


def save_path() -> Path | None:
    """Where ``SLOSCHED_NEXUS_SAVE`` asks the run's objects to be pickled (None: unset), checked before the run
    starts: a folder that is not there would otherwise fail the write after the whole run, and take the report
    with it."""
    text = os.environ.get(SAVE_ENV, "").strip()
    if not text:
        return None
    path = Path(text)
    if path.is_dir() or not path.parent.is_dir():
        raise ConfigError(SAVE_ENV, f"{text!r} must name a file in an existing folder")
    return path


def run(quick: bool) -> dict[str, Any]:
    start = time.perf_counter()
    saved = save_path()
    settings = QUICK_SETTINGS if quick else FULL_SETTINGS
    seeds = QUICK_SEEDS if quick else FULL_SEEDS
    boards, colds = [], []
    for setting in settings:
        board, cold = score(setting, quick, seeds)
        boards.append(board)
        colds.append(cold)
    accuracy = run_tasks(_accuracy_task, [(hw, quick) for hw in HARDWARE], "nexus: step-model accuracy")
    zero = run_tasks(_zero_task, [quick], "nexus: zero-config")[0]
    figures = headline(boards, colds)
    figures["overload_diagnostic"] = diagnose(settings[0], boards[0])
    figures["model_r2"] = {row["hardware"]: row["r2"] for row in accuracy}
    figures["zero_config_converge_s"] = zero["converge_s"]
    figures["settings"] = settings_text(settings, seeds, quick)
    figures["wall_s"] = time.perf_counter() - start
    figures["task_cache"] = TALLY.figures()
    figures["cpu_s"] = cpu_seconds()
    _print_summary(figures, boards)
    if saved is not None:  # the run's objects, so the report can be re-rendered from this very run
        saved.write_bytes(pickle.dumps((boards, colds, accuracy, zero, figures)))
    if not quick:
        from slosched.bench.nexus.report import write_report

        write_report(RESULTS_DIR, boards, colds, accuracy, zero, figures)
    return figures


def cpu_seconds() -> float:
    """CPU seconds of this process and its finished workers: wall time on an idle machine is about this
    over the worker count, whatever else shares the machine."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime


def settings_text(settings: tuple[Setting, ...], seeds: tuple[int, ...], quick: bool) -> list[str]:
    return [
        f"{'quick' if quick else 'full'} run, seeds {list(seeds)}; Llama-3-8B on the vidur stack, noise 5%, "
        "step-model refit every 0.25 s of simulated time",
        *[
            f"{s.label}: {s.num_jobs} measured jobs per run after a discarded warm-up prefix of "
            f"{s.num_warmup_jobs} jobs {PREFIX_RULE} (another seed's, same rate)"
            for s in settings
        ],
        "SLOs: flowgpt TPOT 12 ms; summarization TTFT 2 s; sharegpt TTFT 1 s + TPOT 30 ms; a job meets its "
        "SLO when every call meets its token SLOs",
        f"overload loads {list(LOADS)} x the strongest baseline's median SLO capacity",
        *([] if quick else [FLOWGPT_NOTE]),
    ]


def _print_summary(figures: dict[str, Any], boards: list[Scoreboard]) -> None:
    summary: dict[str, Any] = {}
    for board in boards:
        name = board.workbench
        paper = board.others[PAPER_POLICY].capacity[0.9]
        best = board.baselines[board.strongest].capacity[0.9]
        summary[f"{name}: {PAPER_POLICY} capacity"] = paper.text()
        summary[f"{name}: strongest {board.strongest}"] = best.text()
        summary[f"{name}: ratio vs strongest"] = board.ratio(PAPER_POLICY)
        summary[f"{name}: ratio vs paper baseline"] = board.ratio(PAPER_POLICY, PAPER_BASELINE)
    summary["model_r2"] = ", ".join(f"{hw} {r2:.3f}" for hw, r2 in figures["model_r2"].items())
    summary["zero_config_converge_s"] = figures["zero_config_converge_s"]
    summary["wall_s"] = figures["wall_s"]
    summary["cpu_s"] = figures["cpu_s"]
    print_serving(boards)
    print_figures("nexus", summary)
