"""The GIL is released while an append waits for its durability: with forced thread
switching turned off, a second Python thread makes progress only when the appending thread
lets go of the interpreter, so its counter moving during synced appends proves the release
(the probe is ``appends_another_thread_ran_during`` of ``conftest.py``). Asserts on counts
only, never on durations."""

from __future__ import annotations

import factlog

PROGRESS_WANTED = 3


def test_another_thread_runs_during_synced_appends(path, appends_another_thread_ran_during):
    with factlog.Store(path) as store:
        task = store.task("t1")

        def append(i: int) -> None:
            task.append({"type": "user/message", "text": str(i)}, durability="synced")

        progressed, appends = appends_another_thread_ran_during(append, PROGRESS_WANTED)
        assert task.revision == appends
        assert progressed >= PROGRESS_WANTED, (
            f"the other thread ran during {progressed} of {appends} synced appends"
        )
