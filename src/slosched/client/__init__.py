"""The client side: the SDK (``sdk.py``) and OpenAI streams on httpx-sse (``sse.py``). The gateway never
imports it."""
