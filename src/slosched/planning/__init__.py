"""Capacity planning on a user's scenario: SLO capacity over policies x instance mixes x workloads
(``slosched sweep``), and the smallest instance count (or cost) that carries a target rate."""
