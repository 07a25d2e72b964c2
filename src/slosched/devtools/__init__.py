"""Development and demo tooling kept apart from the gateway: the stub backend, the tiny random-weight
model, launching vLLM servers (plain or with the scheduler plugin) and the gateway, and the Text-to-SQL
demo agent. Nothing in ``gateway/`` (the gateway) imports it."""
