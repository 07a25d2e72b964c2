"""Command line: simulate, compare, demo, bench, policies, trace, profile."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from slosched.core.errors import SloschedError
from slosched.core.records import RunResult
from slosched.scenario import Scenario, load_scenario
from slosched.sim.runner import PolicyPair

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="slosched: SLO-aware LLM serving scheduler",
)
err = Console(stderr=True)
# Piped output (CI logs, `| tee`) gets a width that fits the table instead of rich's 80 columns.
out = Console(width=None if sys.stdout.isatty() else 140)

ScenarioArg = Annotated[Path, typer.Argument(help="scenario YAML file")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON object as the last line")]
TraceOpt = Annotated[Path | None, typer.Option("--trace", help="JSONL trace replacing the scenario's workload")]
ReportOpt = Annotated[Path | None, typer.Option("--report", help="write a report (markdown + plots) here")]


def _run(scenario: Scenario, pairs: Sequence[PolicyPair], trace: Path | None, base_dir: Path) -> dict[str, RunResult]:
    from slosched.experiment import compare_policies

    jobs = scenario.jobs(base_dir, trace)
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err, transient=True
    ) as progress:
        task = progress.add_task("simulating", total=len(pairs))

        def on_start(name: str) -> None:
            progress.update(task, description=f"simulating {name} ({len(jobs)} jobs)", advance=0)

        history = scenario.history(trace)
        results = compare_policies(scenario, pairs, jobs=jobs, on_start=on_start, history=history)
        progress.update(task, completed=len(pairs))
    return results


def _emit(results: dict[str, RunResult], scenario: Scenario, as_json: bool, report: Path | None) -> None:
    from slosched.metrics.summary import summarize
    from slosched.metrics.table import print_table

    summaries = {name: summarize(result) for name, result in results.items()}
    print_table(summaries, title=f"{scenario.name}: {len(next(iter(results.values())).jobs)} jobs", console=out)
    if report is not None:
        from slosched.metrics.report import write_report

        path = write_report(report, results, scenario.name, scenario.description)
        out.print(f"report: {path}")
    if as_json:
        payload = {"policies": {name: summary.to_json_dict() for name, summary in summaries.items()}}
        print(json.dumps(payload, allow_nan=False))


@app.command()
def simulate(
    scenario_path: ScenarioArg,
    policy: Annotated[str | None, typer.Option(help="ROUTER+ENGINE; default: the scenario's first")] = None,
    trace: TraceOpt = None,
    as_json: JsonOpt = False,
    report: ReportOpt = None,
) -> None:
    """Simulate one policy pair on a scenario."""
    scenario = load_scenario(scenario_path)
    pair = PolicyPair.parse(policy) if policy else scenario.policy_pairs()[0]
    _emit(_run(scenario, [pair], trace, scenario_path.parent), scenario, as_json, report)


@app.command()
def compare(
    scenario_path: ScenarioArg,
    policies: Annotated[str | None, typer.Option(help="comma-separated ROUTER+ENGINE pairs")] = None,
    trace: TraceOpt = None,
    as_json: JsonOpt = False,
    report: ReportOpt = None,
) -> None:
    """Compare policy pairs on identical arrivals and seed."""
    scenario = load_scenario(scenario_path)
    pairs = [PolicyPair.parse(text) for text in policies.split(",")] if policies else scenario.policy_pairs()
    _emit(_run(scenario, pairs, trace, scenario_path.parent), scenario, as_json, report)


@app.command()
def demo(
    report: Annotated[Path, typer.Option(help="report folder")] = Path("reports/demo"),
    as_json: JsonOpt = False,
) -> None:
    """The bundled scenario: 2x A100 + 2x A6000 serving a chat + code mix, several policy pairs."""
    from slosched.bench.demo import demo_scenario_path

    path = demo_scenario_path()
    scenario = load_scenario(path)
    _emit(_run(scenario, scenario.policy_pairs(), None, path.parent), scenario, as_json, report)


@app.command()
def bench(
    name: Annotated[str, typer.Argument(help="benchmark name (see `slosched bench list`)")],
    quick: Annotated[bool, typer.Option("--quick", help="a smaller run (under 60 s on 2 cores)")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run a benchmark; prints its figures (and a JSON object last with --json)."""
    from slosched.bench.registry import bench_names, get_bench

    if name == "list":
        out.print("\n".join(bench_names()))
        return
    figures = get_bench(name)(quick)
    if as_json:
        from slosched.metrics.summary import json_safe

        print(json.dumps(json_safe(figures), allow_nan=False))


@app.command()
def policies() -> None:
    """List registered routers, engine presets, engine parts and job policies (built-in and from installed
    packages' ``slosched.policies`` entry points)."""
    from slosched.policies.cluster.base import ROUTERS
    from slosched.policies.engine.base import ADMISSIONS, BATCHINGS, ENGINE_PRESETS, ORDERINGS
    from slosched.policies.job.base import JOB_POLICIES

    for registry in (ROUTERS, ENGINE_PRESETS, ORDERINGS, ADMISSIONS, BATCHINGS, JOB_POLICIES):
        out.print(f"[bold]{registry.kind}[/bold]: {', '.join(registry.names())}")
    out.print("an engine is a preset or ORDERING/ADMISSION/BATCHING, e.g. round-robin+urgency/always/chunked")


@app.command()
def trace(
    scenario_path: ScenarioArg,
    out_path: Annotated[Path, typer.Option("--out", help="JSONL file to write")],
) -> None:
    """Write the scenario's generated jobs as a JSONL trace (for replay with --trace)."""
    from slosched.workloads.trace_io import save_jobs

    scenario = load_scenario(scenario_path)
    jobs = scenario.jobs(scenario_path.parent)
    save_jobs(out_path, jobs)
    out.print(f"wrote {len(jobs)} jobs to {out_path}")


@app.command()
def relquery(
    table: Annotated[str, typer.Option("--table", help="FILE[:TABLE]: CSV, Parquet or SQLite (via DuckDB)")],
    template: Annotated[str, typer.Option("--template", help="prompt with {column} placeholders")],
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="max output tokens per row")],
    where: Annotated[str | None, typer.Option("--where", help="DuckDB SQL filter on the rows")] = None,
    max_rows: Annotated[int | None, typer.Option("--max-rows", help="use at most this many rows")] = None,
    slo: Annotated[float | None, typer.Option("--slo", help="end-to-end SLO in seconds")] = None,
    simulate_path: Annotated[
        Path | None, typer.Option("--simulate", help="scenario YAML: predict the latency on its cluster")
    ] = None,
    policy: Annotated[str | None, typer.Option(help="ROUTER+ENGINE for --simulate; default: the scenario's")] = None,
    output_tokens: Annotated[
        int | None, typer.Option("--output-tokens", help="assumed output per row (default --max-tokens)")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Plan a relQuery (one LLM call per table row) and optionally predict its latency in simulation."""
    from slosched.relquery.plan import plan_relquery

    scenario = load_scenario(simulate_path) if simulate_path is not None else None
    max_len = min(spec.max_model_len for spec in scenario.cluster.specs()) if scenario else 4096
    plan = plan_relquery(table, template, max_tokens, where, slo, max_rows, max_len)
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
    from slosched.serve.app import run_gateway
    from slosched.serve.config import load_config

    config = load_config(config_path)
    bind_host, bind_port = host or config.host, port if port is not None else config.port
    err.print(f"slosched gateway on http://{bind_host}:{bind_port} ({len(config.backends)} backends)")
    run_gateway(config, bind_host, bind_port)


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
    from slosched.devtools.stack import run_up
    from slosched.devtools.up import parse_layers

    depths = parse_layers(layers, count)
    raise typer.Exit(
        run_up(depths, work_dir.resolve(), config_out, gateway_port, engine_policy=engine_policy, policy=policy)
    )


@app.command()
def profile(
    url: Annotated[str, typer.Argument(help="base URL of an idle OpenAI-compatible engine (vLLM)")],
    out_path: Annotated[Path, typer.Option("--out", help="profile JSON to write")],
    model: Annotated[str | None, typer.Option(help="model name (default: the server's first /v1/models)")] = None,
    prompt_lengths: Annotated[str, typer.Option(help="comma-separated prompt lengths")] = "128,512,2048",
    concurrency: Annotated[str, typer.Option(help="comma-separated wave sizes")] = "1,4,16",
    output_lengths: Annotated[str, typer.Option(help="comma-separated output lengths (>= 2)")] = "64",
    repeats: Annotated[int, typer.Option(help="waves per grid point")] = 1,
    max_batched_tokens: Annotated[int, typer.Option(help="the engine's max_num_batched_tokens")] = 8192,
    api_key: Annotated[str | None, typer.Option(help="bearer token")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Measure an engine's step times with a designed sweep and fit a profile for `profile:` in scenarios."""
    import httpx

    from slosched.core.errors import ConfigError
    from slosched.perf.profile_fit import PARAMS
    from slosched.tuning.engine_profile import SweepDesign, profile_endpoint
    from slosched.tuning.openai_client import OpenAIClient

    def ints(name: str, text: str) -> tuple[int, ...]:
        try:
            return tuple(int(part) for part in text.split(",") if part.strip())
        except ValueError:
            raise ConfigError(name, f"expected comma-separated integers, got {text!r}") from None

    design = SweepDesign(
        ints("--prompt-lengths", prompt_lengths), ints("--concurrency", concurrency),
        ints("--output-lengths", output_lengths), repeats, max_batched_tokens,
    )  # fmt: skip
    if model is None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        model = str(httpx.get(f"{url.rstrip('/')}/v1/models", headers=headers, timeout=30).json()["data"][0]["id"])
    client = OpenAIClient(url, model, api_key=api_key)
    fitted = profile_endpoint(client, design, lambda p, k, o: err.print(f"wave: prompt {p}, {k} requests, {o} out"))
    fitted.save(out_path)
    for name in PARAMS:
        estimate, low, high = fitted.param(name)
        out.print(f"{name}: {estimate:.4g} [{low:.4g}, {high:.4g}]")
    out.print(f"{fitted.num_steps} steps, residual {fitted.residual_rel_std:.1%}; wrote {out_path}")
    if as_json:
        print(json.dumps(fitted.to_json_dict(), allow_nan=False))


def main() -> None:
    try:
        app()
    except SloschedError as error:
        err.print(f"[red]error:[/red] {error}")
        sys.exit(2)


if __name__ == "__main__":
    main()
