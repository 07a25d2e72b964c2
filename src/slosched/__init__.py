"""slosched: SLO-aware scheduling for LLM inference serving."""

__version__ = "0.1.0"
