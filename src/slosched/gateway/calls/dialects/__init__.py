"""Scheduling hints other serving stacks' clients already send (vllm-router, NVIDIA Dynamo, llm-d), read
into the same ``SloHeaders`` slosched's own headers give: one module per dialect (``vllm_router``,
``dynamo``, ``llm_d``) behind the ``Dialect`` protocol (``base``), merged by ``registry``."""
