"""What opening a store found is in ``Store.open_report``: the log mark that vouches for the
log's end, and any torn tail cut; damage the mark vouches for raises ``Corruption`` naming it
and changes nothing (``format-spec/mark.md``)."""

from __future__ import annotations

import os

import pytest

import factlog


def segment(path: str) -> str:
    return os.path.join(path, "00000000000000000001.seg")


def write_messages(path: str, count: int) -> None:
    with factlog.Store(path) as store:
        task = store.task("t")
        for i in range(count):
            task.append({"type": "user/message", "text": f"m{i}"}, durability="synced")


def test_a_clean_close_is_reported_and_nothing_is_cut(path):
    write_messages(path, 5)
    with factlog.Store(path) as store:
        report = store.open_report
        assert report["tail_cut"] is None
        assert report["mark"]["clean"] is True
        assert report["mark"]["durable_seq"] == 5
        assert report["last_seq"] == 5


def test_damage_the_mark_vouches_for_raises_corruption_and_changes_nothing(path):
    write_messages(path, 50)
    with open(segment(path), "r+b") as file:
        file.truncate(100)
    with pytest.raises(factlog.Corruption) as info:
        factlog.Store(path)
    assert "through 50" in info.value.message
    assert "factlog salvage" in info.value.message
    assert os.path.getsize(segment(path)) == 100


def test_a_store_without_a_mark_reports_its_cut(path):
    write_messages(path, 3)
    with open(segment(path), "r+b") as file:
        data = file.read()
        end = len(data.rstrip(b"\0"))
        file.seek(end + 8)
        file.write(b"\xab" * 10)
    os.remove(os.path.join(path, "MARK"))
    with factlog.Store(path) as store:
        report = store.open_report
        assert report["mark"] is None
        cut = report["tail_cut"]
        assert cut["first_seq_cut"] == 4 and cut["bytes"] > 0
        assert "cut a torn tail" in cut["message"]
