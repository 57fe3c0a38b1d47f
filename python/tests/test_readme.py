"""The README's Python example runs as written: the first ```python block of its "Python"
section is extracted from README.md and executed twice in one scratch directory."""

from __future__ import annotations

import contextlib
import io
import os


def test_the_readme_example_runs(tmp_path, monkeypatch, readme_python_block):
    code = readme_python_block("Python")
    assert 10 <= len(code.strip().splitlines()) <= 25
    monkeypatch.chdir(tmp_path)
    for _ in range(2):  # twice in one directory, as a reader may paste it again
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md (Python)", "exec"), {"__name__": "readme"})
        assert out.getvalue() == "STALE_REVISION 0 5\n"
    assert os.path.isdir(tmp_path / "agent.factlog")
