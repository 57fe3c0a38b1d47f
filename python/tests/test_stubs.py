"""The type stubs match the native module: every public name of `factlog._native` is in
`_native.pyi` and the reverse, every method of its classes too, and every public name has a
docstring."""

from __future__ import annotations

import ast
import os

import factlog
from factlog import _native

STUB = os.path.join(os.path.dirname(factlog.__file__), "_native.pyi")


def stub_names():
    with open(STUB, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    top, members = set(), {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            top.add(node.name)
            members[node.name] = {
                n.name for n in node.body if isinstance(n, ast.FunctionDef)
            }
        elif isinstance(node, ast.FunctionDef):
            top.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            top.add(node.target.id)
    return top, members


def test_stubs_name_exactly_the_native_module():
    top, members = stub_names()
    native = {name for name in dir(_native) if not name.startswith("_")} | {"__version__"}
    assert top == native
    for cls, methods in members.items():
        actual = {name for name in dir(getattr(_native, cls))
                  if not name.startswith("_") or name in {"__enter__", "__exit__", "__iter__",
                                                          "__next__", "__init__"}}
        assert methods - {"__init__"} <= actual | {"__init__"}, cls
        public = {name for name in actual if not name.startswith("_")}
        assert public <= methods, f"{cls}: not in the stub: {public - methods}"


def test_every_public_name_has_a_docstring():
    for name in factlog.__all__:
        value = getattr(factlog, name)
        if isinstance(value, (int, list)):
            continue
        assert getattr(value, "__doc__", None), name
    for cls in (factlog.Store, factlog.Task):
        for name in dir(cls):
            if not name.startswith("_"):
                assert getattr(cls, name).__doc__, f"{cls.__name__}.{name}"
