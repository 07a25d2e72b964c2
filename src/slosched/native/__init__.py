"""Compiled simulator modules: the simulator's hot modules built with mypyc, used only while they match.

The simulator is plain, typed Python. ``slosched native build`` compiles its hot modules (``modules.py``)
with mypyc, the compiler that ships with mypy, into a cache folder named after a digest of their
sources; ``activate`` (run when ``slosched`` is imported) serves the compiled modules in place of the
sources only while every source they were built from is unchanged. An edited source therefore falls
back to the pure-Python modules at once, never to stale code. ``SLOSCHED_NATIVE=0`` turns it off;
``SLOSCHED_NATIVE_DIR`` moves the cache (default: ``$XDG_CACHE_HOME/slosched/native``).

Why compile rather than hand-tune further: after two rounds of tuning the pure-Python profile was flat
(no function above ~6%), and ``slosched bench sim-speed`` measured x1.4-1.5 from mypyc on the same code
(``pure_python_requests_per_second`` in the bench's figures keeps that measurement). The records are
the same bit for bit: ``tests/native`` runs scenarios in both modes and compares every record.

Compiled code checks declared types strictly, where Python would take a ``numpy.int64`` for an ``int``.
So the inputs are made plain where they enter: specs and options convert numpy numbers when built
(``core/numbers.py``), and the compiled modules read policies' answers through ``Any`` and convert them.
``tests/native/_numpy_probe.py`` runs a numpy-typed third-party router, batching and predictor both ways.
"""

from slosched.native.loader import NativeStatus, activate, is_compiled, native_status

__all__ = ["NativeStatus", "activate", "is_compiled", "native_status"]
