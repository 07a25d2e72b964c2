"""The client side: the SDK (``sdk.py``) and the SSE parser (``sse.py``). The gateway never imports it."""
