"""The pipe waits' polling (``spin.py``): it polls only while polling pays."""

from __future__ import annotations

from pathlib import Path

from codemode.js_runtime.spin import RunQueue, Spinner


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


def test_one_miss_alone_does_not_back_off() -> None:
    spinner = Spinner(50e-6, Clock())
    assert polled(spinner) > 40  # polled through its budget, then gave up
    assert polled(spinner, ready_after=3) == 3  # the next wait polls again, and catches
    assert polled(spinner) > 40  # another lone miss
    assert polled(spinner) > 40  # a second in a row: now it backs off
    assert polled(spinner) == 1


def test_after_misses_in_a_row_it_sleeps_at_once_for_twice_as_many_waits_each_time() -> None:
    spinner = Spinner(50e-6, Clock())
    assert polled(spinner) > 40
    assert polled(spinner) > 40  # two misses in a row: skip 1
    assert polled(spinner) == 1  # the next wait only looks once
    assert polled(spinner) > 40  # and the one after polls again: a third miss
    assert [polled(spinner) for _ in range(3)] == [1, 1, polled(Spinner(50e-6, Clock()))]


def test_a_success_halves_the_backoff_and_ends_the_run_of_misses() -> None:
    spinner = Spinner(50e-6, Clock())
    assert polled(spinner) > 40
    assert polled(spinner) > 40  # skip 1 (then 2, then 4)
    assert polled(spinner) == 1
    assert polled(spinner) > 40
    assert [polled(spinner) for _ in range(2)] == [1, 1]
    assert polled(spinner) > 40
    assert [polled(spinner) for _ in range(4)] == [1, 1, 1, 1]
    assert polled(spinner, ready_after=5) == 5  # caught: the backoff halves to 4
    assert polled(spinner) > 40  # a lone miss after a catch: no skipping yet
    assert polled(spinner) > 40  # the second in a row skips 4, not 8
    assert [polled(spinner) for _ in range(4)] == [1, 1, 1, 1]
    assert polled(spinner) > 40


def test_being_descheduled_while_polling_counts_as_a_miss() -> None:
    clock = Clock()
    clock.jump_at = 5
    spinner = Spinner(50e-6, clock)
    assert polled(spinner) < 10  # gave up at the jump, not at the budget
    clock.jump_at = clock.readings + 5
    assert polled(spinner) < 10  # again: two in a row
    assert polled(spinner) == 1


def test_a_short_gap_between_polls_is_not_a_deschedule() -> None:
    clock = Clock()
    spinner = Spinner(500e-6, clock)

    class Gap:  # one reading 50 us late: a stolen tick, not a deschedule
        calls = 0

        def __call__(self) -> bool:
            self.calls += 1
            if self.calls == 5:
                clock.now += 50e-6
            return self.calls >= 20

    assert spinner.wait(Gap())


def test_the_run_queue_says_busy_while_more_tasks_can_run_than_there_are_cpus(
    tmp_path: Path,
) -> None:
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("0.52 0.61 0.70 3/512 4242\n")
    queue = RunQueue(str(loadavg), cpus=2)
    assert queue.busy(0.0)  # three runnable tasks on two CPUs
    loadavg.write_text("0.52 0.61 0.70 2/512 4243\n")  # same length: read in place
    assert queue.busy(0.001)  # not looked at again yet
    assert not queue.busy(1.0)  # looked at again: the caller and one more fit
    # The real file parses (whatever it says), and a machine without it is never busy.
    RunQueue().busy(0.0)
    assert not RunQueue(str(tmp_path / "missing")).busy(0.0)


def test_while_the_machine_is_busy_a_wait_looks_once_and_keeps_its_backoff() -> None:
    busy = [True]
    spinner = Spinner(50e-6, Clock(), busy=lambda now: busy[0])
    assert polled(spinner) == 1  # no polling at all
    assert polled(spinner, ready_after=1) == 1
    busy[0] = False
    assert polled(spinner) > 40  # a CPU to spare: polls through its budget again


def test_a_skipped_wait_answered_soon_ends_the_backoff() -> None:
    """Both pipe ends backed off keep each other asleep (each rare poll waits for the
    other's wake-up): a wait that skipped polling and was still answered within a
    millisecond shows the other end is quick, and polling resumes at once."""
    clock = Clock()
    spinner = Spinner(50e-6, clock)
    assert polled(spinner) > 40
    spinner.woke()  # (a poll that missed: not a skipped wait, nothing changes)
    assert polled(spinner) > 40  # two in a row: back off
    spinner.woke()
    assert polled(spinner) == 1  # skipped
    clock.now += 200e-6  # answered 0.2 ms after the wait began
    spinner.woke()
    assert polled(spinner) > 40  # polling again, and the run of misses starts afresh
    assert polled(spinner, ready_after=2) == 2


def test_a_skipped_wait_answered_late_keeps_the_backoff() -> None:
    clock = Clock()
    spinner = Spinner(50e-6, clock)
    assert polled(spinner) > 40
    assert polled(spinner) > 40  # skip 1, then 2
    assert polled(spinner) == 1
    clock.now += 5e-3  # a slow tool: 5 ms
    spinner.woke()
    assert polled(spinner) > 40  # the skip was used up: one poll, a miss
    assert [polled(spinner) for _ in range(2)] == [1, 1]  # and the backoff grew
