"""``slosched profile``: measure an engine's step times and fit a profile for a scenario's ``profile:``.

The URL is checked first (scheme, then one ``/v1/models`` call with a short timeout), so a dead or wrong
URL is one ``error:`` line naming it, before any sweep starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from slosched.cli.common import JsonOpt, err, out, output_file
from slosched.core.errors import ConfigError

_PROBE_TIMEOUT_S = 10.0


def _ints(name: str, text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(name, f"expected comma-separated integers, got {text[:64]!r}") from None


def _models(url: str, api_key: str | None) -> list[str]:
    """The served model ids; any transport or protocol failure is a ``ConfigError`` naming the URL."""
    import httpx

    if not url.startswith(("http://", "https://")):
        raise ConfigError("url", f"expected http(s)://host[:port], got {url[:64]!r}")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    endpoint = f"{url.rstrip('/')}/v1/models"
    try:
        response = httpx.get(endpoint, headers=headers, timeout=_PROBE_TIMEOUT_S)
    except httpx.HTTPError as error:
        raise ConfigError("url", f"cannot reach {endpoint}: {type(error).__name__}: {error}"[:300]) from None
    if response.status_code != 200:
        raise ConfigError("url", f"{endpoint} answered HTTP {response.status_code}; is it an OpenAI-compatible engine?")
    try:
        payload: Any = response.json()
        return [str(item["id"]) for item in payload["data"]]
    except (ValueError, KeyError, TypeError):
        raise ConfigError("url", f"{endpoint} did not answer an OpenAI model list") from None


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

    from slosched.perf.profile_fit import PARAMS
    from slosched.tuning.engine_profile import SweepDesign, profile_endpoint
    from slosched.tuning.openai_client import OpenAIClient

    design = SweepDesign(
        _ints("--prompt-lengths", prompt_lengths),
        _ints("--concurrency", concurrency),
        _ints("--output-lengths", output_lengths),
        repeats,
        max_batched_tokens,
    )
    output_file(out_path, "--out")
    served = _models(url, api_key)
    if model is None:
        if not served:
            raise ConfigError("url", f"{url[:64]} serves no model")
        model = served[0]
    client = OpenAIClient(url, model, api_key=api_key)
    try:
        fitted = profile_endpoint(client, design, lambda p, k, o: err.print(f"wave: prompt {p}, {k} requests, {o} out"))
    except httpx.HTTPError as error:
        raise ConfigError("url", f"the engine failed during the sweep: {type(error).__name__}: {error}"[:300]) from None
    fitted.save(out_path)
    for name in PARAMS:
        estimate, low, high = fitted.param(name)
        out.print(f"{name}: {estimate:.4g} [{low:.4g}, {high:.4g}]")
    out.print(f"{fitted.num_steps} steps, residual {fitted.residual_rel_std:.1%}; wrote {out_path}")
    if as_json:
        print(json.dumps(fitted.to_json_dict(), allow_nan=False))
