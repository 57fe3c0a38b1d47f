"""Runs LangGraph's checkpointer conformance suite (``langgraph-checkpoint-conformance``,
installed at a pinned version by ``.ci/python-langgraph``) on ``factlog.langgraph.FactlogSaver``.

Two registrations: a saver that opens its own store, and savers sharing one open store (each
capability's fresh saver on the same store, so they also see each other's threads). Prints
the suite's report for each, then one line ``N passed, M failed``; exits non-zero unless every
capability (the five base ones and the three optional ones the saver implements) passed.

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


def _registrations(scratch: str):
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

    return [own_store, shared_store]


async def _main() -> int:
    passed = failed = 0
    all_ok = True
    with tempfile.TemporaryDirectory() as scratch:
        for registered in _registrations(scratch):
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
