"""The gateway: an OpenAI-compatible asyncio server in front of vLLM backends (docs/serving.md).

Rooms, each importing only the ones below it (checked by import-linter):
``http`` (routes, hot path, server) > ``jobs`` (workflows, relQueries, their store) > ``dispatch`` (the
``Dispatcher`` and its per-backend slots) > ``backends`` (the upstream client, one backend's health,
ejection and forwarding) > ``ops`` (config, identity, limits, metrics, status data, reload) > ``calls``
(one parsed OpenAI call and its errors).
"""
