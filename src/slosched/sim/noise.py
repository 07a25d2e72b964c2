"""Seeded multiplicative step-time noise, consumed strictly in step order.

Step k of an instance always gets the k-th factor of its stream, however steps are grouped (one at a
time or a fast-forwarded run), which keeps fast-forwarding bit-identical to stepping.
"""

from __future__ import annotations

import numpy as np


class NoiseStream:
    """Lognormal factors with mean 1 (``sigma`` of the log); ``sigma == 0`` gives exactly 1.0."""

    __slots__ = ("_buffer", "_position", "_rng", "_sigma")

    _CHUNK = 4096

    def __init__(self, rng: np.random.Generator, sigma: float) -> None:
        self._rng = rng
        self._sigma = sigma
        self._buffer: list[float] = []
        self._position = 0

    def take(self, count: int) -> list[float]:
        if self._sigma == 0.0:
            return [1.0] * count
        end = self._position + count
        if end > len(self._buffer):
            self._refill(count)
            end = self._position + count
        factors = self._buffer[self._position : end]
        self._position = end
        return factors

    def take_one(self) -> float:
        """``take(1)[0]`` without the list (one prefill step)."""
        if self._sigma == 0.0:
            return 1.0
        position = self._position
        if position >= len(self._buffer):
            self._refill(1)
            position = 0
        self._position = position + 1
        return self._buffer[position]

    def give_back(self, count: int) -> None:
        """Return the last ``count`` factors unused (a fast-forwarded run was cut short)."""
        self._position -= count

    def _refill(self, count: int) -> None:
        size = max(self._CHUNK, count)
        normal = self._rng.standard_normal(size)
        fresh = np.exp(self._sigma * normal - 0.5 * self._sigma * self._sigma).tolist()
        self._buffer = self._buffer[self._position :] + fresh
        self._position = 0
