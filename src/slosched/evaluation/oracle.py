"""The evaluation's ORACLE: an output-length predictor that reads the true lengths from the job specs.

It measures the limit (what a policy would reach if it knew every call's true output length) and is
reported beside every result, labelled. It lives here, outside the policy registries, so no scenario,
gateway or plugin can reach it by name; ``workbench.simulate_candidate`` hands it to a candidate marked
``oracle`` (the one run path every bench shares).
"""

from __future__ import annotations

from collections.abc import Sequence

from slosched.core.job import JobSpec
from slosched.core.request import Request


class OracleOutputPredictor:
    """ORACLE (evaluation only): predicts every call's *true* output length, read from the job specs.

    Used to label an upper bound; a live system cannot know this.
    """

    def __init__(self, jobs: Sequence[JobSpec]) -> None:
        # Request ids are ``{job}/{stage}/{call index}`` (sim/cluster.py), so the truth is keyed the same.
        self._truth = {
            f"{job.id}/{stage.name}/{index}": call.output_tokens
            for job in jobs
            for stage in job.stages
            for index, call in enumerate(stage.calls)
        }

    def predict(self, request: Request) -> float:
        return float(self._truth[request.id])

    def observe(self, request: Request, output_tokens: int) -> None:
        return None
