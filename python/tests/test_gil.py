"""The GIL is released while an append waits for its durability: with forced thread
switching turned off, a second Python thread makes progress only when the appending thread
lets go of the interpreter, so its counter moving during synced appends proves the release.
Without the release the counter cannot move during an append at all; with it, it moves
during some of them (how many depends on the scheduler of a loaded machine, so the test
appends until it has seen a few, within a bound). Asserts on counts only, never on
durations."""

from __future__ import annotations

import sys
import threading
import time

import factlog

APPENDS_MAX = 2000
PROGRESS_WANTED = 3


def test_another_thread_runs_during_synced_appends(path):
    with factlog.Store(path) as store:
        task = store.task("t1")
        counter = [0]
        stop = threading.Event()

        def spin() -> None:
            while not stop.is_set():
                counter[0] += 1
                time.sleep(0)  # hands the GIL back only if someone waits for it

        interval = sys.getswitchinterval()
        sys.setswitchinterval(1000.0)  # no forced switch: only voluntary releases
        spinner = threading.Thread(target=spin)
        try:
            spinner.start()
            progressed = 0
            appends = 0
            while appends < APPENDS_MAX and progressed < PROGRESS_WANTED:
                before = counter[0]
                task.append({"type": "user/message", "text": str(appends)}, durability="synced")
                appends += 1
                if counter[0] > before:
                    progressed += 1
        finally:
            stop.set()
            sys.setswitchinterval(interval)
            spinner.join()
        assert task.revision == appends
        assert progressed >= PROGRESS_WANTED, (
            f"the other thread ran during {progressed} of {appends} synced appends"
        )
