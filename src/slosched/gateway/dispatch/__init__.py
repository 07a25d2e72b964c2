"""Dispatch: the ``Dispatcher`` over a set of per-backend slots (backend + queue + step predictor), routing,
retries, what a finished call teaches, and live alpha tuning."""
