"""HTTP: the starlette app, the plain-ASGI OpenAI routes (the hot path), the server entry, the status page."""
