"""slosched's engine policies inside vLLM: a v1 scheduler plugin (``--scheduler-cls``).

Modules that import vLLM (``scheduler``) are only imported inside vLLM's EngineCore process; everything
else here (metadata schema, plugin config, views, plan application, state export, control file, launcher)
is plain Python so the gateway and the tests can use it without vLLM installed. See docs/vllm-plugin.md.
"""
