import pytest

from slosched.sim.kernel import EventKernel


def test_events_fire_in_time_then_schedule_order() -> None:
    kernel = EventKernel()
    fired: list[str] = []
    kernel.schedule(1.0, fired.append, "late-tie")
    kernel.schedule(0.5, fired.append, "first")
    kernel.schedule(1.0, fired.append, "later-tie")
    kernel.run()
    assert fired == ["first", "late-tie", "later-tie"]
    assert kernel.num_events == 3


def test_scheduling_in_the_past_is_an_error() -> None:
    kernel = EventKernel()
    kernel.schedule(2.0, lambda _: None)
    kernel.run()
    with pytest.raises(ValueError, match="before now"):
        kernel.schedule(1.0, lambda _: None)


def test_run_until_leaves_later_events() -> None:
    kernel = EventKernel()
    fired: list[int] = []
    for time_s in (1.0, 2.0, 3.0):
        kernel.schedule(time_s, fired.append, int(time_s))
    kernel.run(until_s=2.0)
    assert fired == [1, 2]
    assert kernel.pending == 1
