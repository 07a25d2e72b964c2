"""Per-job entries kept until their expiry time and dropped in bulk."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from slosched.policies.job.expiring import FLOOR, ExpiringEntries

# (job index, lifetime, pop instead of put) at successive times
steps = st.lists(st.tuples(st.integers(0, 300), st.floats(min_value=0.0, max_value=50.0), st.booleans()), max_size=600)


@given(steps)
def test_no_live_entry_is_lost_and_a_popped_one_is_gone(ops: list[tuple[int, float, bool]]) -> None:
    entries: ExpiringEntries[int] = ExpiringEntries()
    model: dict[str, tuple[float, int]] = {}  # what a plain dict that never forgets holds
    for now, (index, lifetime, pop) in enumerate(ops):
        job = f"j{index}"
        if pop:
            value = entries.pop(job)
            expected = model.pop(job, None)
            # An entry is either still there with its value or was dropped after it expired.
            assert value == (expected[1] if expected else None) or (expected and expected[0] < now and value is None)
        else:
            entries.put(job, now, now + lifetime, float(now))
            model[job] = (now + lifetime, now)
        for name, (expires_s, _) in model.items():
            if expires_s >= now:
                assert name in entries
    assert len(entries) <= len(model)


def test_expired_entries_do_not_pile_up() -> None:
    entries: ExpiringEntries[None] = ExpiringEntries()
    for index in range(10_000):  # each expires at once, none is ever popped
        entries.put(f"j{index}", None, float(index), float(index))
        assert len(entries) <= 2 * 1 + FLOOR + 1  # each drop keeps one live entry, the newest
    assert "j9999" in entries
