"""Which modules are compiled: the simulator's event loop and everything it calls per request or per step.

Chosen from profiles of ``slosched bench sim-speed``: the simulator's own modules held most of a run's
time. Left interpreted on purpose:
- policies: they are the extension point (users subclass and register their own), and a compiled class
  cannot be subclassed from Python;
- ``sim/views.py``: its snapshot class is the one tests and users subclass to build router inputs;
- ``perf/*``: shared with the gateway and the vLLM plugin, whose processes should run the code they
  always ran; compiling ``perf/linear``, ``perf/roofline`` and ``perf/output_length`` too measured only
  ~3% more.
A module here must be mypyc-clean: no ``runtime_checkable`` protocols, no monkeypatched functions, no
interpreted subclasses. Objects built per step or per request are plain classes with ``__slots__`` and an
explicit ``__init__``: the ``__init__`` the dataclasses module generates stays interpreted (``bench/sim_speed.py``).
"""

from __future__ import annotations

COMPILED_MODULES: tuple[str, ...] = (
    "slosched.sim.belief",
    "slosched.sim.cluster",
    "slosched.sim.cohort",
    "slosched.sim.deadlines",
    "slosched.sim.decode_run",
    "slosched.sim.engine_state",
    "slosched.sim.instance",
    "slosched.sim.jobs",
    "slosched.sim.kernel",
    "slosched.sim.kv",
    "slosched.sim.noise",
    "slosched.sim.outcomes",
    "slosched.sim.prefixes",
    "slosched.sim.sampling",
    "slosched.sim.seq",
    "slosched.sim.step",
)

# The shared library of the compiled group is imported by this top-level name (mypyc's ``group_name``).
GROUP_NAME = "slosched_native"
GROUP_MODULE = f"{GROUP_NAME}__mypyc"
