"""Runs LangGraph's checkpointer conformance suite (``langgraph-checkpoint-conformance``,
installed at a pinned version by ``.ci/python-langgraph``) on ``factlog.langgraph.FactlogSaver``.

Four registrations. On a store open in this process: a saver that opens its own store, and
savers sharing one open store (each capability's fresh saver on the same store, so they also
see each other's threads). On a client of a store served by another process (a holder
process, ``python/tests/served_holder.py``, opens it with ``share=True``): a saver given the
path of a fresh served store (``factlog.Store(path)`` finds it served and connects), and
savers each on a connection of their own (``factlog.connect(path)``) to one served store.
Prints the suite's report for each, then one line ``N passed, M failed``; exits non-zero
unless every capability (the five base ones and the three optional ones the saver
implements) passed for every registration.

    python python/langgraph_suite/run_conformance.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile

import factlog
from factlog.langgraph import FactlogSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import ProgressCallbacks

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from served_holder import StoreHolder  # noqa: E402


def _registrations(scratch: str, holder: StoreHolder):
    @checkpointer_test(name="FactlogSaver(path)")
    async def own_store():
        path = tempfile.mkdtemp(dir=scratch)
        async with FactlogSaver(os.path.join(path, "store")) as saver:
            yield saver

    shared: dict = {}

    async def shared_lifespan():
        shared["store"] = factlog.Store(os.path.join(scratch, "shared"))
        yield
        shared["store"].close()

    @checkpointer_test(name="FactlogSaver(store=shared)", lifespan=shared_lifespan)
    async def shared_store():
        async with FactlogSaver(store=shared["store"]) as saver:
            yield saver

    @checkpointer_test(name="FactlogSaver(path served by another process)")
    async def served_own_store():
        path = os.path.join(tempfile.mkdtemp(dir=scratch), "store")
        holder.share(path)
        try:
            async with FactlogSaver(path) as saver:
                assert saver.store.served_by == holder.pid, "the saver did not connect"
                yield saver
        finally:
            holder.release(path)

    served: dict = {}

    async def served_lifespan():
        served["path"] = os.path.join(scratch, "served")
        holder.share(served["path"])
        yield
        holder.release(served["path"])

    @checkpointer_test(name="FactlogSaver(store=factlog.connect(served))", lifespan=served_lifespan)
    async def served_shared_store():
        store = factlog.connect(served["path"])
        try:
            async with FactlogSaver(store=store) as saver:
                yield saver
        finally:
            store.close()

    return [own_store, shared_store, served_own_store, served_shared_store]


async def _main() -> int:
    passed = failed = 0
    all_ok = True
    with tempfile.TemporaryDirectory() as scratch, StoreHolder() as holder:
        for registered in _registrations(scratch, holder):
            report = await validate(registered, progress=ProgressCallbacks.verbose())
            report.print_report()
            for name, result in sorted(report.results.items()):
                passed += result.tests_passed
                failed += result.tests_failed
                if not result.detected or result.passed is not True:
                    all_ok = False
                    print(f"{registered.name}: capability {name} did not pass: {result}")
                for failure in result.failures:
                    print(f"  {name}: {failure}")
    print(f"conformance: {passed} passed, {failed} failed")
    return 0 if all_ok and failed == 0 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(_main()))
