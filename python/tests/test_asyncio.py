"""`factlog.aio`: awaitable appends, batches and recovery that do not block the event loop
(a ticker coroutine keeps running while synced appends wait)."""

from __future__ import annotations

import asyncio

import factlog
from factlog import aio


def test_awaitable_appends_do_not_block_the_loop(path):
    async def main() -> None:
        async with await aio.open(path) as store:
            task = await store.task("t1")
            ticks = 0
            done = asyncio.Event()

            async def ticker() -> None:
                nonlocal ticks
                while not done.is_set():
                    ticks += 1
                    await asyncio.sleep(0)

            ticking = asyncio.ensure_future(ticker())
            await asyncio.sleep(0)
            before = ticks
            replies = []
            for i in range(10):
                replies.append(await task.append({"type": "user/message", "text": str(i)},
                                                  durability="synced"))
            done.set()
            await ticking
            assert ticks > before  # the loop ran while the appends waited
            assert [r["revision"] for r in replies] == list(range(1, 11))
            batch = await task.append_batch([{"type": "turn/start"},
                                             {"type": "user/message", "text": "b"}])
            assert (batch["count"], batch["revision"]) == (2, 12)
            with_tasks = await asyncio.gather(
                *(aio.append(task.sync, {"type": "user/message", "text": "g"}) for _ in range(5))
            )
            assert sorted(r["revision"] for r in with_tasks) == list(range(13, 18))
            report = await store.recover()
            assert report["dry_run"] is False
            assert task.revision == 17
            state = await task.state()
            assert state["revision"] == 17

    asyncio.run(main())


def test_errors_propagate_through_await(path):
    async def main() -> None:
        store = aio.AsyncStore(factlog.Store(path))
        task = await store.task("t1")
        try:
            await task.append({"type": "no/such"})
        except factlog.InvalidEvent as error:
            assert error.code == "INVALID_EVENT"
        else:
            raise AssertionError("not raised")
        await store.close()

    asyncio.run(main())


def test_awaitable_appends_pass_warnings_on(path):
    key = "AKIA" + "IOSFODNN7EXAMPLE"

    async def main() -> None:
        async with await aio.open(path) as store:
            task = await store.task("t1")
            put = {"type": "record/put", "kind": "k", "key": "a", "value": key}
            assert (await task.append(put))["warnings"]
            assert "warnings" not in await task.append(dict(put, key="b"), warnings=False)
            assert "warnings" not in await aio.append(task.sync, dict(put, key="c"), warnings=False)
            batch = [dict(put, key="d"), dict(put, key="e")]
            assert (await task.append_batch(batch))["warnings"]
            assert "warnings" not in await task.append_batch(
                [dict(put, key="f")], warnings=False
            )
            assert "warnings" not in await aio.append_batch(
                task.sync, [dict(put, key="g")], warnings=False
            )

    asyncio.run(main())
