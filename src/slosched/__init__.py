"""slosched: SLO-aware scheduling for LLM inference serving."""

__version__ = "0.1.0"

__all__ = ["Client", "__version__"]


def __getattr__(name: str) -> object:
    # Lazy: importing slosched (the simulator, policies) must not pull in the HTTP client stack.
    if name == "Client":
        from slosched.serve.sdk import Client

        return Client
    raise AttributeError(f"module 'slosched' has no attribute {name!r}")
