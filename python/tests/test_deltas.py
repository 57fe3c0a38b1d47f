"""`task.deltas(texts)` appends fragments exactly as that many `task.delta` calls do (the same
events, in order), embedded and through a served store; it is not atomic: a refused fragment
raises and the ones before it stay; a `str` is refused rather than split into characters; and
the docs' example of it runs."""

from __future__ import annotations

import asyncio

import pytest

import factlog
import factlog.aio


def delta_texts(store, task_id):
    return [e["text"] for e in store.events(task=task_id) if e["type"] == "assistant/delta"]


def test_deltas_append_the_events_delta_appends(store_path):
    fragments = ["Hel", "lo, ", "wörld 🦀", "", "!"]
    with factlog.Store(store_path) as store:
        one, many = store.task("one"), store.task("many")
        for text in fragments:
            one.delta(text)
        last = many.deltas(fragments)
        many.deltas(text for text in ("a", "b"))  # any iterable
        many.deltas(("c",))
        assert many.deltas([]) is None
        if store.served_by is None:
            assert last == list(store.events(task="many"))[len(fragments) - 1]["seq"]
        else:
            assert last is None  # pipelined, as delta's are
    with factlog.Store(store_path) as store:
        assert delta_texts(store, "one") == fragments
        assert delta_texts(store, "many") == fragments + ["a", "b", "c"]
        state = store.task("many").state()
        assert state["execution"]["deltas"] == len(fragments) + 3


def test_a_refused_fragment_raises_and_the_ones_before_it_stay(path):
    with factlog.Store(path) as store:
        task = store.task("t1")
        with pytest.raises(factlog.LimitExceeded):
            task.deltas(["kept", "y" * 70_000, "never"])  # over the delta text limit
        assert delta_texts(store, "t1") == ["kept"]
        with pytest.raises(TypeError):
            task.deltas(["fine", 7])
        assert delta_texts(store, "t1") == ["kept", "fine"]


def test_a_str_is_refused_not_split_into_characters(path):
    with factlog.Store(path) as store:
        task = store.task("t1")
        with pytest.raises(TypeError, match="list of str"):
            task.deltas("abc")
        assert task.revision == 0


def test_the_async_forms(path):
    async def run():
        async with await factlog.aio.open(path) as store:
            task = await store.task("t1")
            assert isinstance(task.deltas(["a", "b"]), int)
            assert isinstance(await task.deltas_async(["c"]), int)

    asyncio.run(run())
    with factlog.Store(path) as store:
        assert delta_texts(store, "t1") == ["a", "b", "c"]


def test_the_docs_example_runs(tmp_path, monkeypatch, run_python_block):
    monkeypatch.chdir(tmp_path)
    assert run_python_block("Streaming fragments") == "6 Hello, world! It is sunny.\n"
