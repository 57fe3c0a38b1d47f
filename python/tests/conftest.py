"""Shared fixtures: a fresh store directory per test (also one served by another process), the
README's Python blocks, and the probe that tells whether another thread runs while an append
waits (the GIL released)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import threading
import time
from typing import Callable

import pytest

from served_holder import StoreHolder

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")
DOCS_PYTHON = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")


@pytest.fixture
def path(tmp_path) -> str:
    """A directory path for a new store (not created yet)."""
    return os.path.join(str(tmp_path), "store")


@pytest.fixture(scope="session")
def store_holder():
    """A process that holds and shares stores on request (``served_holder.py``), one for the
    whole run."""
    with StoreHolder() as holder:
        yield holder


@pytest.fixture(params=["embedded", "served"])
def store_path(request, tmp_path):
    """``path``, twice: a directory for a new store, then one whose store another process
    (``store_holder``) holds and shares, so that ``factlog.Store(path)`` there connects to it.
    For the tests that must hold on a client of a served store as on an embedded store."""
    path = os.path.join(str(tmp_path), "store")
    if request.param == "embedded":
        yield path
        return
    holder = request.getfixturevalue("store_holder")
    holder.share(path)
    try:
        yield path
    finally:
        holder.release(path)


def _readme_python_block(section: str, document: str = README) -> str:
    with open(document, encoding="utf-8") as f:
        text = f.read()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", body, re.DOTALL)
    assert match, f"{document}: the {section!r} section has no python block"
    return match.group(1)


def _run_python_block(section: str, document: str = DOCS_PYTHON) -> str:
    code = _readme_python_block(section, document)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        name = f"{os.path.basename(document)} ({section})"
        exec(compile(code, name, "exec"), {"__name__": "docs"})
    return out.getvalue()


@pytest.fixture
def run_python_block() -> Callable[..., str]:
    """Runs the first ```python block of a section of docs/python.md (or of the document
    given) in the current directory; returns what it printed."""
    return _run_python_block


@pytest.fixture
def readme_python_block() -> Callable[..., str]:
    """The first ```python block of a section, by its ``##`` title, of the README or of the
    document whose path is given (such as docs/python.md)."""
    return _readme_python_block


def _appends_another_thread_ran_during(
    append: Callable[[int], None], wanted: int, bound: int = 2000
) -> tuple:
    """Calls ``append(i)`` until another thread has made progress during ``wanted`` of the
    calls, at most ``bound`` times; returns (calls during which it ran, calls made).

    Forced thread switching is turned off, so the other thread (which yields only when
    someone waits for the GIL) can run during a call only if the call releases the GIL:
    without the release the first number stays 0. How many of the calls it runs during
    depends on the scheduler of a loaded machine, hence the bound instead of a fixed count.
    Counts only, never durations."""
    counter = [0]
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            counter[0] += 1
            time.sleep(0)  # hands the GIL back only if someone waits for it

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)  # no forced switch: only voluntary releases
    spinner = threading.Thread(target=spin)
    progressed = calls = 0
    try:
        spinner.start()
        while calls < bound and progressed < wanted:
            before = counter[0]
            append(calls)
            calls += 1
            progressed += counter[0] > before
    finally:
        stop.set()
        sys.setswitchinterval(interval)
        spinner.join()
    return progressed, calls


@pytest.fixture
def appends_another_thread_ran_during() -> Callable[..., tuple]:
    """See ``_appends_another_thread_ran_during``."""
    return _appends_another_thread_ran_during
