"""``slosched picker``: the endpoint picker (Envoy ext_proc) for llm-d / the Gateway API Inference Extension."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from slosched.cli.common import err, input_file


def picker(
    config_path: Annotated[Path, typer.Option("--config", help="picker config YAML or JSON (see docs/picker.md)")],
    port: Annotated[int | None, typer.Option("--port", help="gRPC port (default: the config's, 9002)")] = None,
    host: Annotated[str | None, typer.Option("--host", help="bind address (default: the config's, 0.0.0.0)")] = None,
    metrics_port: Annotated[
        int | None, typer.Option("--metrics-port", help="Prometheus /metrics port (default: the config's, 9090)")
    ] = None,
) -> None:
    """Serve the ext_proc endpoint picker: route each request with slosched's router over the pool."""
    from slosched.core.errors import ConfigError
    from slosched.picker.config import load_picker_config

    try:  # gRPC and Envoy's stubs are the `picker` extra: without them, say how to get them
        from slosched.picker.server import run_picker
    except ImportError as missing:
        raise ConfigError(
            "picker", f"needs the picker extra ({missing.name} is missing): pip install 'slosched[picker]'"
        ) from None

    config = load_picker_config(input_file(config_path, "--config"))
    for name, value in (("--port", port), ("--metrics-port", metrics_port)):
        if value is not None and not 0 <= value <= 65535:
            raise ConfigError(name, f"expected 0..65535, got {value}")
    source = f"InferencePool {config.kubernetes.pool}" if config.kubernetes else f"{len(config.endpoints)} endpoints"
    err.print(f"slosched picker on {host or config.host}:{config.port if port is None else port} ({source})")
    asyncio.run(run_picker(config, host, port, metrics_port))
