"""A process that holds stores and shares them, so that tests and the adapters' suites can run
on a client in another process: :class:`StoreHolder` starts it (``python served_holder.py``)
and asks it, one JSON line at a time over its standard input, to open a directory with
``factlog.Store(path, share=True)`` or to close one; the caller then connects with
``factlog.connect(path)`` or ``factlog.Store(path)``. The process closes every store it holds
and exits when its standard input ends, so a killed caller never leaves it behind.

Used by ``python/langgraph_suite/run_conformance.py``, ``python/agents_suite/
factlog_sdk_plugin.py`` (``FACTLOG_SDK_SERVED=1``) and the served tests of the adapters.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Dict, Optional

HANG_GUARD_SECONDS = 120
"""How long the caller waits for the holder to answer before it calls it a hang."""


class StoreHolder:
    """A child process that holds and shares stores on request. Thread-safe; a context
    manager (``close`` on exit)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: Optional[subprocess.Popen] = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.pid = self._process.pid
        """The holder's process id: what ``factlog.Store.served_by`` names on its clients."""

    def share(self, path: str) -> None:
        """Opens (or creates) the store in ``path`` in the holder process with
        ``share=True``; returns once its socket answers."""
        self._ask({"share": os.fspath(path)})

    def release(self, path: str) -> None:
        """Closes the store in ``path`` in the holder process (its clients are disconnected)."""
        self._ask({"close": os.fspath(path)})

    def _ask(self, request: Dict[str, str]) -> None:
        with self._lock:
            process = self._process
            if process is None:
                raise RuntimeError("the store holder was closed")
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"the store holder (pid {self.pid}) exited; asked {request}")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"the store holder could not do {request}: {reply['error']}")

    def close(self) -> None:
        """Ends the holder: it closes every store it holds and exits. Idempotent."""
        with self._lock:
            process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None and process.stdout is not None
        process.stdin.close()
        try:
            process.wait(HANG_GUARD_SECONDS)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            process.stdout.close()
        if process.returncode != 0:
            raise RuntimeError(f"the store holder exited with status {process.returncode}")

    def __enter__(self) -> "StoreHolder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _serve() -> int:
    """The holder's loop: one request line in, one reply line out."""
    import factlog

    stores: Dict[str, factlog.Store] = {}
    try:
        for line in sys.stdin:
            request = json.loads(line)
            try:
                if "share" in request:
                    path = request["share"]
                    if path not in stores:
                        stores[path] = factlog.Store(path, share=True)
                    reply = {"shared": path}
                else:
                    path = request["close"]
                    store = stores.pop(path, None)
                    if store is not None:
                        store.close()
                    reply = {"closed": path}
            except Exception as error:  # reported to the caller, which raises it
                reply = {"error": f"{type(error).__name__}: {error}"}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
    finally:
        for store in stores.values():
            store.close()
    return 0


if __name__ == "__main__":
    sys.exit(_serve())
