"""Serialized values as the LangGraph saver's records hold them: what the serializer's
``dumps_typed`` returned, kept as JSON structure when its bytes come back from that structure
byte for byte, as base64 otherwise (the same two forms as the Node package's
``node/lib/langgraph/codec.ts``). A checkpoint in a ``record/blob`` is read as a third form,
``{"type": T, "bytes": B}``: ``B`` the blob's raw bytes.

- ``{"type": "msgpack", "value": V}``: the bytes are the msgpack of ``V``, a JSON value
  (``ormsgpack.packb(V)``). LangGraph's serializer writes msgpack, so a checkpoint of plain
  data (dicts, lists, strings, numbers) is stored as itself and ``factlog dump`` shows it.
- ``{"type": "msgpack", "value": V, "ext": true}``: as above, where the bytes also hold
  msgpack extension values (LangChain messages, dataclasses, datetimes, ... as LangGraph's
  serializer writes them): each is the object ``{"$msgpack_ext": [code, P]}`` in ``V``, its
  payload the msgpack of ``P`` in turn.
- ``{"type": T, "base64": B}``: the bytes ``B`` in standard base64, for everything else:
  another type (``bytes``, ``null``, ``pickle``, ...), msgpack with binary strings, non-string
  keys or non-finite floats, and any value whose bytes would not come back byte for byte.
  Also every value holding ``"$secret"`` (the store replaces a ``{"$secret": ...}`` object in
  a body, so it would not come back) or ``"$msgpack_ext"`` (which the structure reserves).

A value is kept as structure only when packing the structure gives the serializer's bytes
exactly, checked as it is written; reading packs it again and hands the serializer those same
bytes, so the serializer always reads exactly what it wrote. A value of another shape (the
Node package's ``{"type": "json", "value": ...}``, or damage) is refused with
``CorruptEvent``, never guessed at.
"""

from __future__ import annotations

import base64
import threading
from collections import OrderedDict
from typing import Any, Dict, Hashable, List, Optional, Tuple

import ormsgpack

from ._native import _holds
from .errors import CorruptEvent

EXT_KEY = "$msgpack_ext"
"""The key of the object that stands for a msgpack extension value inside a stored value."""

_DOLLAR = b"$"
_SECRET = b"$secret"
_EXT_KEY_BYTES = EXT_KEY.encode()
_MSGPACK = "msgpack"
_EXT_OPTION = ormsgpack.OPT_PASSTHROUGH_SUBCLASS

Typed = Tuple[str, bytes]
"""What ``serde.dumps_typed`` returns and ``serde.loads_typed`` takes."""

FOREIGN = (
    "a LangGraph record of this thread holds a value this saver does not read (a JSON "
    'value of type "json", or no "base64"): a thread written by the Node package\'s '
    "FactlogSaver is read by that saver (the two serializers differ); read it with "
    "`factlog dump --json`"
)


class _Ext(dict):  # type: ignore[type-arg]
    """An extension value while a value is checked: packed back as the extension, where a
    plain dict of the same shape (one a graph's state holds) is packed as a map."""


def _ext_default(obj: Any) -> Any:
    if type(obj) is _Ext:
        code, payload = obj[EXT_KEY]
        packed = ormsgpack.packb(payload, default=_ext_default, option=_EXT_OPTION)
        return ormsgpack.Ext(code, packed)
    raise TypeError(f"not a msgpack value: {type(obj).__name__}")


def _structure(obj: Any, data: bytes) -> Tuple[Any, bool]:
    """The JSON structure whose msgpack is ``data`` (the serializer's bytes for ``obj``), and
    whether it holds extension values; raises ``ValueError`` when there is none."""
    # The object itself, when plain msgpack of it is the serializer's bytes (no extension
    # anywhere): the store converts it as it would convert the decoded form, without decoding.
    try:
        if ormsgpack.packb(obj) == data:
            return obj, False
    except (TypeError, ValueError):
        pass
    seen: List[int] = []

    def hook(code: int, payload: bytes) -> _Ext:
        seen.append(code)
        return _Ext({EXT_KEY: [code, ormsgpack.unpackb(payload, ext_hook=hook)]})

    try:
        value = ormsgpack.unpackb(data, ext_hook=hook)
        again = ormsgpack.packb(value, default=_ext_default, option=_EXT_OPTION)
    except (TypeError, ValueError) as error:  # ormsgpack's decode and encode errors too
        raise ValueError(f"no JSON structure: {error}") from error
    if again != data:
        raise ValueError("the structure's msgpack differs from the serializer's bytes")
    return value, bool(seen)


def stored(obj: Any, typed: Typed) -> Dict[str, Any]:
    """``typed`` (the serializer's output for ``obj``) as a record holds it: as structure when
    it comes back byte for byte, else in base64."""
    kind, data = typed
    # One scan for "$" before the two for the words that start with it.
    reserved = _DOLLAR in data and (_holds(data, _SECRET) or _holds(data, _EXT_KEY_BYTES))
    if kind == _MSGPACK and not reserved:
        try:
            value, ext = _structure(obj, data)
        except ValueError:
            pass
        else:
            if ext:
                return {"type": kind, "value": value, "ext": True}
            return {"type": kind, "value": value}
    return in_base64(typed)


def marks_a_secret(data: bytes) -> bool:
    """Whether serialized bytes hold a ``{"$secret": ...}`` mark: such a value is kept in base64
    (where the store's credential-shape checks do not look), never as raw bytes (where they
    do, and a mark counts for nothing)."""
    return _DOLLAR in data and _holds(data, _SECRET)


def in_base64(typed: Typed) -> Dict[str, Any]:
    """``typed`` as a record holds it in base64: the form every value can take."""
    kind, data = typed
    return {"type": kind, "base64": base64.b64encode(data).decode("ascii")}


def is_structure(value: Any) -> bool:
    """Whether a stored value is kept as structure."""
    return isinstance(value, dict) and "value" in value


def _with_ext(value: Any) -> Any:
    """``value`` with each ``{"$msgpack_ext": [code, payload]}`` object as the extension."""
    if isinstance(value, dict):
        if len(value) == 1 and EXT_KEY in value:
            code, payload = value[EXT_KEY]
            return ormsgpack.Ext(code, ormsgpack.packb(_with_ext(payload)))
        return {key: _with_ext(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_with_ext(item) for item in value]
    return value


def typed_of(value: Any) -> Typed:
    """The serializer's ``(type, bytes)`` a stored value holds; ``CorruptEvent`` for a value
    of another shape."""
    if isinstance(value, dict):
        kind = value.get("type")
        raw = value.get(RAW)
        if isinstance(kind, str) and isinstance(raw, bytes):
            return kind, raw
        encoded = value.get("base64")
        if isinstance(kind, str) and isinstance(encoded, str):
            try:
                return kind, base64.b64decode(encoded, validate=True)
            except ValueError as error:
                raise CorruptEvent(f"a LangGraph record holds bad base64: {error}") from error
        if kind == _MSGPACK and "value" in value:
            structure = value["value"]
            try:
                if value.get("ext") is True:
                    return kind, ormsgpack.packb(_with_ext(structure))
                return kind, ormsgpack.packb(structure)
            except (TypeError, ValueError) as error:
                raise CorruptEvent(
                    f"a LangGraph record holds a value that is not msgpack's: {error}"
                ) from error
    raise CorruptEvent(FOREIGN)


# A checkpoint read from a record/blob: ``{"type": T, "bytes": B}``, the serializer's bytes
# raw (``B``: the blob's bytes).
RAW = "bytes"


def load(serde: Any, value: Any, direct: bool) -> Tuple[Any, Typed]:
    """The object a stored value holds, read by ``serde``, with the serializer's ``(type,
    bytes)``. ``direct``: ``serde`` is LangGraph's own ``JsonPlusSerializer`` and ``value`` is
    fresh from the log (no one else holds it): a structure without extensions is then the
    object itself, which is what the serializer would make of its msgpack (a JSON value
    decodes to itself), without decoding it again."""
    typed = typed_of(value)
    if direct and "value" in value and "ext" not in value:
        return value["value"], typed
    return serde.loads_typed(typed), typed


class ValueCache:
    """Serialized values a saver read or wrote, by where they sit in the log (a checkpoint's
    seq, a write's seq, task id and index), least recently used out, bounded by the bytes of
    the values. The log is append-only, so a cached value never goes stale; a removed one is
    never asked for again and ages out. Shared by the saver's threads (its own lock)."""

    def __init__(self, bytes_max: int) -> None:
        self.bytes_max = bytes_max
        self._entries: "OrderedDict[Hashable, Typed]" = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Optional[Typed]:
        """The value at ``key``, or ``None``."""
        with self._lock:
            typed = self._entries.get(key)
            if typed is not None:
                self._entries.move_to_end(key)
            return typed

    def put(self, key: Hashable, typed: Typed) -> None:
        """Keeps ``typed`` at ``key`` unless it alone is over the bound."""
        size = len(typed[1]) + _ENTRY_BYTES
        if size > self.bytes_max:
            return
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return
            self._entries[key] = typed
            self._bytes += size
            while self._bytes > self.bytes_max:
                _, old = self._entries.popitem(last=False)
                self._bytes -= len(old[1]) + _ENTRY_BYTES

    def clear(self) -> None:
        """Forgets every value."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0


# What an entry of the cache costs beside its bytes (the key, the tuple, the dict's slot).
_ENTRY_BYTES = 200


def size_of(value: Any) -> int:
    """About the bytes a stored value takes in a record body (for batching copies)."""
    if isinstance(value, dict):
        raw = value.get(RAW)
        if isinstance(raw, bytes):
            return len(raw)
        encoded = value.get("base64")
        if isinstance(encoded, str):
            return len(encoded)
        if "value" in value:
            return len(ormsgpack.packb(value["value"])) * 2  # JSON adds quotes and escapes
    return 0
