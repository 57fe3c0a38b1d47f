"""The README's Python example runs as written: the first ```python block of its "Python"
section is extracted from README.md and executed in a scratch directory."""

from __future__ import annotations

import contextlib
import io
import os
import re

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def python_example() -> str:
    with open(README, encoding="utf-8") as f:
        text = f.read()
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "the README's Python section has no python block"
    return match.group(1)


def test_the_readme_example_runs(tmp_path, monkeypatch):
    code = python_example()
    assert 10 <= len(code.strip().splitlines()) <= 25
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md (Python)", "exec"), {"__name__": "readme"})
    assert out.getvalue() == "STALE_REVISION 0 5\n"
    assert os.path.isdir(tmp_path / "agent.factlog")
