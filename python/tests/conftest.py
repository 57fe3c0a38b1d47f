"""Shared fixtures: a fresh store directory per test."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def path(tmp_path) -> str:
    """A directory path for a new store (not created yet)."""
    return os.path.join(str(tmp_path), "store")
