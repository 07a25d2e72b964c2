"""Evaluation machinery (DESIGN section 9): SLO capacity by bisection, the workbench (one workload on one
cluster, common random numbers, warm-up prefix), the scoreboard against the strongest baseline, the oracle
that marks the limit, throughput ceilings, runners on local processes or Ray, and how figures are printed.

``planning`` (``slosched sweep``) and every benchmark in ``bench`` build on it; it imports neither."""
