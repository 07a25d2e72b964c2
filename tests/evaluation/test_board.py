"""The scoreboard's result object (``evaluation/board.py``): what a saved board reads back as."""

from __future__ import annotations

import pickle

from slosched.evaluation.board import Scoreboard
from slosched.evaluation.workbench import RunFigures


def test_a_board_pickled_before_overload_done_existed_reads_back_with_no_step_unfinished() -> None:
    board = Scoreboard("chat", 80, (1, 2), ("vllm-v1",), strongest="least-tokens+fcfs")
    board.overload_done[("least-tokens+fcfs", 1.0, 1)] = RunFigures(
        2.0, 1, 80, 0.9, 1.8, 0, 0.85, 40, 0.95
    )  # no NaN: equal to itself
    again = pickle.loads(pickle.dumps(board))
    assert again == board and again.overload_done == board.overload_done

    # The state an older board pickled: every slot of today's but the last.
    _, slots = board.__reduce_ex__(pickle.HIGHEST_PROTOCOL)[2]
    old = {name: value for name, value in slots.items() if name != "overload_done"}
    restored = Scoreboard.__new__(Scoreboard)
    restored.__setstate__((None, old))
    assert restored.overload_done == {} and restored.strongest == board.strongest and restored.seeds == (1, 2)
