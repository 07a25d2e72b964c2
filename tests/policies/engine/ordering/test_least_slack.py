"""least-slack's FlipMemo: the flips ``flip_s`` gives, asked through the memo, with the belief refitted at the
same moments (the rest of the ordering is tested with the stack: ``tests/policies/stacks/test_slosched.py``)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.views import StepObservation
from slosched.perf.linear import LinearStepPredictor
from slosched.policies.engine.ordering.least_slack import FlipMemo, flip_s
from tests.policies.engine.test_queue import Engine, Seq
from tests.policies.engine.test_queue_expiring_keys import request


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_the_memo_answers_as_flip_s_and_moves_no_refit(seed: int) -> None:
    rng = random.Random(seed)
    memo = FlipMemo()
    # Twins: the same calls and observations; one engine asked through the memo, the other directly.
    asked, direct = (Engine(step_predictor=LinearStepPredictor(refit_every=4)) for _ in range(2))
    seqs: list[tuple[Seq, Seq]] = []
    for step in range(120):
        action = rng.random()
        if action < 0.25 or not seqs:
            shared = request(
                step, asked.now_s, rng.uniform(0.05, 2.0), rng.choice([None, 0.2]), rng.uniform(1, 60), False
            )
            seqs.append((Seq(shared, shared.prompt_tokens), Seq(shared, shared.prompt_tokens)))
            asked.waiting.append(seqs[-1][0])
        elif action < 0.35:
            observation = StepObservation(0, 0, rng.randint(1, 64), 5_000, (rng.uniform(0.005, 0.05),))
            asked.step_predictor.observe(observation)
            direct.step_predictor.observe(observation)
        elif action < 0.4:  # a call preempted after its first token comes back with it
            first = asked.now_s
            for seq in rng.choice(seqs):
                seq.first_token_s = first
        else:
            mine, theirs = rng.choice(seqs)
            assert memo.flip_s(mine, asked) == flip_s(theirs, direct)
        asked.now_s = direct.now_s = asked.now_s + 0.01
    assert asked.step_predictor.belief_state() == direct.step_predictor.belief_state()
    assert asked.step_predictor._num_fitted == direct.step_predictor._num_fitted


def test_the_memo_forgets_calls_long_gone() -> None:
    memo = FlipMemo()
    engine = Engine()
    for number in range(1_100):
        shared = request(number, 0.0, 1.0, None, 5.0, False)
        memo.flip_s(Seq(shared, shared.prompt_tokens), engine)
    assert len(memo._flips) < 1_100  # cleared past 2 x the (empty) queue + 1,024 entries
