"""slosched: SLO-aware scheduling for LLM inference serving."""

from slosched.native import activate as _activate_native

__version__ = "0.1.0"

__all__ = ["Client", "__version__"]

# Before any simulator module is imported: serve its compiled build when one matches the sources
# (slosched/native; nothing is read until a compiled module is first imported).
_activate_native()


def __getattr__(name: str) -> object:
    # Lazy: importing slosched (the simulator, policies) must not pull in the HTTP client stack.
    if name == "Client":
        from slosched.client.sdk import Client

        return Client
    raise AttributeError(f"module 'slosched' has no attribute {name!r}")
