"""Unicode and large bodies round-trip byte for byte; the limits are enforced with
`LimitExceeded`; the returned dicts have the protocol's and the dump's shapes."""

from __future__ import annotations

import os

import pytest

import factlog

TEXTS = ["héllo wörld", "日本語のテキスト", "emoji 🦀🐍 and ZWJ 👩‍💻", "nul \x00 and \n newline",
         "quote \" backslash \\", "\u2028\u2029", ""]


def test_unicode_round_trips_in_deltas_messages_and_args(path):
    with factlog.Store(path) as store:
        task = store.task("tâche-ü")
        for text in TEXTS:
            task.delta(text)
            task.append({"type": "user/message", "text": text})
        task.append({"type": "tool/call", "call_id": "c-ß", "tool": "τ", "effect": "read_only",
                     "args": {"ключ": TEXTS, "n": [1, -2, 3.5, True, None, {"x": {}}]}})
    with factlog.Store(path) as store:
        events = list(store.events())
        deltas = [e["text"] for e in events if e["type"] == "assistant/delta"]
        messages = [e["text"] for e in events if e["type"] == "user/message"]
        assert deltas == TEXTS and messages == TEXTS
        call = events[-1]
        assert call["task"] == "tâche-ü" and call["call_id"] == "c-ß"
        assert call["args"] == {"ключ": TEXTS, "n": [1, -2, 3.5, True, None, {"x": {}}]}
        assert list(call)[:6] == ["seq", "task", "revision", "timestamp_us", "time", "type"]
        assert call["time"].endswith("Z")


def test_large_bodies_up_to_the_limit_and_refused_beyond(path):
    with factlog.Store(path) as store:
        task = store.task("t1")
        big = "ü" * (1024 * 1024)  # 2 MiB of UTF-8
        reply = task.append({"type": "user/message", "text": big})
        assert reply["durability"] == "flushed"
        task.delta("d" * (64 * 1024))
        with pytest.raises(factlog.LimitExceeded):
            task.append({"type": "user/message", "text": "x" * (5 * 1024 * 1024)})
        assert task.revision == 2
    with factlog.Store(path) as store:
        texts = [e["text"] for e in store.events()]
        assert texts[0] == big and len(texts[1]) == 64 * 1024


def test_reply_shapes_match_the_protocol(path):
    with factlog.Store(path) as store:
        task = store.task("t1")
        reply = task.append({"type": "turn/start", "id": "r1"})
        assert list(reply) == ["id", "seq", "task", "revision", "durability"]
        task.append({"type": "tool/call", "call_id": "c1", "tool": "publish",
                     "effect": "idempotent", "request_key": "k1"})
        task.append({"type": "tool/result", "call_id": "c1", "outcome": "ok",
                     "receipt": {"article_id": 7}})
        duplicate = task.append({"type": "tool/call", "call_id": "c1", "tool": "publish",
                                 "effect": "idempotent", "request_key": "k1"})
        assert duplicate == {"seq": 3, "task": "t1", "revision": 3, "durability": "synced",
                             "duplicate": True, "call_id": "c1", "receipt": {"article_id": 7}}
        assert task.delta("x") == 4


def test_request_key_matches_vector_024():
    """Every request-key line of format-spec/vectors/024 (4 fields: task, operation,
    revision, key), as `factlog request-key` and the Rust library derive it."""
    vector = os.path.join(os.path.dirname(__file__), "..", "..", "format-spec", "vectors",
                          "024-request-keys.txt")
    checked = 0
    with open(vector, encoding="utf-8") as f:
        for line in f.read().split("\n"):
            fields = line.split("\t")
            if line.startswith("#") or len(fields) != 4 or not fields[3].startswith("rk1_"):
                continue
            task, operation, revision, key = fields
            assert factlog.request_key(task, operation, int(revision)) == key
            checked += 1
    assert checked >= 5
