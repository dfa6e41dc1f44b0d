"""The pipe waits' polling (``spin.py``): it polls only while polling pays."""

from __future__ import annotations

from codemode.js_runtime.spin import Spinner


class Clock:
    """One microsecond per reading, or a jump when told (a descheduled poller)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.jump_at: int | None = None
        self.readings = 0

    def __call__(self) -> float:
        self.readings += 1
        self.now += 1e-3 if self.readings == self.jump_at else 1e-6
        return self.now


class Probe:
    def __init__(self, ready_after: int | None = None) -> None:
        self.calls = 0
        self.ready_after = ready_after

    def __call__(self) -> bool:
        self.calls += 1
        return self.ready_after is not None and self.calls >= self.ready_after


def polled(spinner: Spinner, ready_after: int | None = None) -> int:
    probe = Probe(ready_after)
    spinner.wait(probe)
    return probe.calls


def test_a_quick_answer_is_caught_by_polling() -> None:
    spinner = Spinner(50e-6, Clock())
    probe = Probe(ready_after=10)
    assert spinner.wait(probe) and probe.calls == 10


def test_after_a_miss_it_sleeps_at_once_for_twice_as_many_waits_each_time() -> None:
    spinner = Spinner(50e-6, Clock())
    assert polled(spinner) > 40  # polled through its budget, then gave up
    assert polled(spinner) == 1  # the next wait only looks once
    assert polled(spinner) > 40  # and the one after polls again: a second miss
    assert [polled(spinner) for _ in range(3)] == [1, 1, polled(Spinner(50e-6, Clock()))]


def test_a_success_halves_the_backoff() -> None:
    spinner = Spinner(50e-6, Clock())
    assert polled(spinner) > 40  # a miss: skip 1 (then 2, then 4)
    assert polled(spinner) == 1
    assert polled(spinner) > 40
    assert [polled(spinner) for _ in range(2)] == [1, 1]
    assert polled(spinner) > 40
    assert [polled(spinner) for _ in range(4)] == [1, 1, 1, 1]
    assert polled(spinner, ready_after=5) == 5  # caught: the next miss skips 4, not 8
    assert polled(spinner) > 40
    assert [polled(spinner) for _ in range(4)] == [1, 1, 1, 1]
    assert polled(spinner) > 40


def test_being_descheduled_while_polling_counts_as_a_miss() -> None:
    clock = Clock()
    clock.jump_at = 5
    spinner = Spinner(50e-6, clock)
    assert polled(spinner) < 10  # gave up at the jump, not at the budget
    assert polled(spinner) == 1
