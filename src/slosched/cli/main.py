"""Command line: simulate, compare, demo, bench, policies, schema, trace, profile, relquery, serve, up, picker.

Commands live here or in the other ``cli`` modules (registered at the bottom). ``main`` is the entry point: every
failure there is one ``error:`` line per problem on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from slosched.cli.common import JsonOpt, SetOpt, err, error_line, out
from slosched.cli.info import policies, schema, version_callback
from slosched.cli.native import native_app
from slosched.cli.picker import picker
from slosched.cli.profile import profile
from slosched.cli.simulate import compare, demo, load, simulate
from slosched.cli.trace import register as register_trace_commands
from slosched.core.errors import SloschedError
from slosched.sim.runner import PolicyPair

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # Markdown, not rich markup: rich's markup read a bracketed word in a help as a style tag (``--set``'s
    # example 'policies=[least-tokens+fcfs]' showed as 'policies=') and kept a docstring's line breaks in the
    # command list.
    rich_markup_mode="markdown",
    help="slosched: SLO-aware LLM serving scheduler",
)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", help="print the version and exit", is_eager=True, callback=version_callback),
    ] = False,
) -> None:
    pass


@app.command()
def bench(
    name: Annotated[str, typer.Argument(help="benchmark name (see `slosched bench list`)")],
    quick: Annotated[bool, typer.Option("--quick", help="a smaller run, same method and fields")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run a benchmark; prints its figures (and a JSON object last with --json). Ctrl-C stops it and prints
    the figures of the rows that finished, marked partial (exit 130)."""
    from slosched.bench.registry import bench_names, get_benchmark

    if name == "list":
        out.print("\n".join(bench_names()))
        return
    from slosched.bench.base import BenchmarkFailed, run_keeping_rows
    from slosched.core.errors import Interrupted
    from slosched.evaluation.runners import worker_count
    from slosched.metrics.summary import json_safe

    benchmark = get_benchmark(name)
    worker_count(1)  # a bad SLOSCHED_BENCH_WORKERS is an error before anything runs, not after a first stage

    def announce(row: str) -> None:  # a row's figures are kept from here on, whatever happens next
        print(f"bench {name}: row {row!r} finished", file=sys.stderr, flush=True)

    try:
        figures = run_keeping_rows(benchmark, quick, announce)
    except Interrupted as stop:
        _print_partial(stop.partial, as_json)
        rows = stop.partial["finished_rows"]
        shown = f": {', '.join(rows)}; their figures are shown, marked partial" if rows else ""
        count = f"{len(rows)} row{'' if len(rows) == 1 else 's'}"
        error_line(f"interrupted: bench {name} stopped with {count} finished{shown}; no report written")
        raise
    except BenchmarkFailed as failure:  # the figures when it measured some, then one error: line
        if as_json and failure.figures is not None:
            print(json.dumps(json_safe(failure.figures), allow_nan=False))
        raise
    if as_json:
        print(json.dumps(json_safe(figures), allow_nan=False))


def _print_partial(figures: dict[str, Any], as_json: bool) -> None:
    """An interrupted bench's finished rows: the JSON line with --json, else a table per row on stderr (its
    plain figures, and those of its tables of plain figures one level down)."""
    if not figures["finished_rows"]:
        return
    from slosched.metrics.summary import json_safe

    if as_json:
        print(json.dumps(json_safe(figures), allow_nan=False), flush=True)
        return
    from slosched.evaluation.formatting import print_figures

    for row, values in figures["rows"].items():
        flat: dict[str, Any] = {}
        for key, value in values.items():
            inner = value.items() if isinstance(value, dict) else [("", value)]
            flat.update({f"{key}: {k}" if k else key: v for k, v in inner if isinstance(v, str | int | float)})
        print_figures(f"bench {figures['bench']} (partial: interrupted): {row}", flat)


@app.command()
def relquery(
    table: Annotated[str, typer.Option("--table", help="FILE[:TABLE]: CSV, Parquet or SQLite (via DuckDB)")],
    template: Annotated[str, typer.Option("--template", help="prompt with {column} placeholders")],
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="max output tokens per row")],
    where: Annotated[str | None, typer.Option("--where", help="row filter: column tests, AND/OR")] = None,
    max_rows: Annotated[int | None, typer.Option("--max-rows", help="use at most this many rows")] = None,
    slo: Annotated[float | None, typer.Option("--slo", help="end-to-end SLO in seconds")] = None,
    simulate_path: Annotated[
        Path | None, typer.Option("--simulate", help="scenario YAML: predict the latency on its cluster")
    ] = None,
    policy: Annotated[str | None, typer.Option(help="ROUTER+ENGINE for --simulate; default: the scenario's")] = None,
    output_tokens: Annotated[
        int | None, typer.Option("--output-tokens", help="assumed output per row (default --max-tokens)")
    ] = None,
    order: Annotated[
        str, typer.Option(help="send rows as read (table), sorted for prefix reuse (rows), or fields too (fields)")
    ] = "table",
    as_json: JsonOpt = False,
    sets: SetOpt = None,
) -> None:
    """Plan a relQuery (one LLM call per table row) and optionally predict its latency in simulation."""
    from slosched.relquery.plan import plan_relquery

    scenario = load(simulate_path, sets) if simulate_path is not None else None
    max_len = min(spec.max_model_len for spec in scenario.cluster.specs()) if scenario else 4096
    plan = plan_relquery(table, template, max_tokens, where, slo, max_rows, max_len, order)
    payload: dict[str, object] = {"plan": plan.summary()}
    for key, value in plan.summary().items():
        out.print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")
    if scenario is not None:
        from dataclasses import asdict

        from slosched.relquery.predict import predict_latency

        pairs = [PolicyPair.parse(policy)] if policy else None
        predictions = predict_latency(plan, scenario, pairs, output_tokens)
        for item in predictions:
            out.print(
                f"{item.policy}: latency {item.latency_s:.2f} s (waiting {item.waiting_s:.2f}, core "
                f"{item.core_s:.2f}, tail {item.tail_s:.2f}; prefix hits {item.prefix_hit_rate:.0%})"
            )
        payload["predictions"] = [asdict(item) for item in predictions]
    if as_json:
        print(json.dumps(payload, allow_nan=False))


@app.command()
def serve(
    config_path: Annotated[Path, typer.Argument(help="gateway config YAML (see docs/serving.md)")],
    host: Annotated[str | None, typer.Option(help="bind address (default: the config's, 127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option(help="port (default: the config's)")] = None,
) -> None:
    """Run the gateway in front of vLLM servers."""
    from slosched.gateway.http.server import serve_gateway
    from slosched.gateway.ops.config import load_config

    config = load_config(config_path)
    bind_host, bind_port = host or config.host, port if port is not None else config.port

    def announce(url: str) -> None:
        err.print(f"slosched gateway on {url} ({len(config.backends)} backends)")

    serve_gateway(config, bind_host, bind_port, config_path, announce)  # SIGHUP reloads config_path


@app.command()
def up(
    count: Annotated[int, typer.Argument(help="number of local vLLM CPU servers")] = 2,
    layers: Annotated[str, typer.Option(help="model depths, cycled over the servers (heterogeneity)")] = "2,8",
    work_dir: Annotated[Path, typer.Option(help="models and server logs")] = Path("reports/up"),
    config_out: Annotated[Path | None, typer.Option(help="also write the gateway config here")] = None,
    gateway_port: Annotated[int, typer.Option(help="port written into the gateway config")] = 8080,
    engine_policy: Annotated[
        str | None, typer.Option(help="run vLLM with slosched's scheduler plugin and this engine preset")
    ] = None,
    policy: Annotated[
        str | None, typer.Option(help="the gateway config's policy: ROUTER+ENGINE or a stack (slosched)")
    ] = None,
) -> None:
    """Start N local vLLM CPU servers (tiny generated models), print the gateway config, stop on Ctrl-C."""
    from slosched.devtools.bring_up import run_up
    from slosched.devtools.up import parse_layers

    depths = parse_layers(layers, count)
    raise typer.Exit(
        run_up(depths, work_dir.resolve(), config_out, gateway_port, engine_policy=engine_policy, policy=policy)
    )


# Capacity planning lives in its own module (cli/sweep.py): registered here so `slosched sweep` exists.
from slosched.cli.sweep import sweep_command  # noqa: E402
from slosched.cli.tune import tune  # noqa: E402

app.command("sweep")(sweep_command)


# The scenario, info and profile commands live in their modules; registered here, in help order.
app.command("simulate")(simulate)
app.command("compare")(compare)
app.command("demo")(demo)
app.command("policies")(policies)
app.command("schema")(schema)
app.command("profile")(profile)
app.command("picker")(picker)
app.command("tune")(tune)
app.add_typer(native_app, name="native")
# `trace` (dump, import) and `hardware` live in cli/trace.py.
register_trace_commands(app)


def main(argv: Sequence[str] | None = None) -> None:
    """The ``slosched`` entry point; ``argv`` defaults to ``sys.argv[1:]``."""
    code = run(argv)
    if code == 130:
        # Ctrl-C: what finished is written. The interpreter's last collection would walk every object the run
        # and its imports made (a second or more on a busy machine) only to free memory the exit frees anyway;
        # frozen objects are left out of it (atexit handlers still run).
        gc.freeze()
    sys.exit(code)


def run(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code; failures print one ``error:`` line per problem (exit 2)."""
    # typer vendors click; its usage errors derive from the public ``TyperException``.
    from typer.exceptions import Abort, TyperException

    try:
        code = app(args=list(argv) if argv is not None else None, prog_name="slosched", standalone_mode=False)
    except TyperException as error:
        if type(error).__name__ == "NoArgsIsHelpError":  # the help is printed already
            return 2
        path = getattr(getattr(error, "ctx", None), "command_path", None) or "slosched"
        _error(f"{error.format_message()} (see {path} --help)")
        return 2
    except Abort:
        _error("interrupted")
        return 130
    except SloschedError as error:
        _error(str(error))
        return 2
    except OSError as error:  # a file the checks could not foresee (disk full, permissions changed mid-run)
        where = f"{error.filename}: " if error.filename else ""
        _error(f"{where}{error.strerror or error}")
        return 2
    except Exception as error:
        if os.environ.get("SLOSCHED_DEBUG"):
            raise
        _error(f"internal error: {type(error).__name__}: {str(error)[:200]} (SLOSCHED_DEBUG=1 shows the traceback)")
        return 2
    return code if isinstance(code, int) else 0


_error = error_line
