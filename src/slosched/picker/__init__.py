"""slosched as an endpoint picker (EPP) for llm-d and the Gateway API Inference Extension: an Envoy ext_proc
gRPC service that runs the gateway's router over an inference pool's endpoints and answers with the chosen
one (``x-gateway-destination-endpoint``). See docs/picker.md.

Modules: ``config`` (the YAML), ``pool`` (the gateway's routing table over the endpoints), ``scrape`` (their
metrics), ``messages`` and ``extproc`` (the protocol), ``usage`` (what the responses teach), ``metrics`` (the
picker's own /metrics), ``kube`` (endpoints from an InferencePool), ``server``.
"""
