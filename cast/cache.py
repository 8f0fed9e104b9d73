"""One on-disk cache for every expensive external call (entity linkers, knowledge-base look-ups, model outputs).

Entries live in a SQLite file, keyed by a namespace (what was called, e.g. ``"spotlight"``) and the sha256 of a
canonical JSON form of the call's inputs (e.g. endpoint, confidence, support, text). Values are JSON. A run that
stops halfway keeps everything it already paid for, and a rerun makes no repeated calls.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any


def cache_key(inputs: Any) -> str:
    """A stable key for JSON-serialisable call inputs."""
    canonical = json.dumps(inputs, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class Cache:
    """A persistent key-value cache shared by all stages of a process.

    Example:
        >>> cache = Cache(None)  # in memory; a path keeps it on disk
        >>> cache.get_or_compute("square", {"x": 3}, lambda: 9)
        9
        >>> cache.get_or_compute("square", {"x": 3}, lambda: 0)  # found: not computed again
        9
    """

    def __init__(self, path: str | Path | None):
        """``path=None`` gives an in-memory cache (nothing persists)."""
        self.path = None if path is None else Path(path).expanduser()
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            ":memory:" if self.path is None else str(self.path), check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS entries (namespace TEXT, key TEXT, value TEXT, PRIMARY KEY (namespace, key))"
        )
        self._db.commit()

    def get(self, namespace: str, inputs: Any) -> Any | None:
        return self.get_many(namespace, [inputs])[0]

    def get_many(self, namespace: str, inputs: Sequence[Any]) -> list[Any | None]:
        """Cached values for each of ``inputs`` (None where absent)."""
        keys = [cache_key(i) for i in inputs]
        found: dict[str, Any] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                rows = self._db.execute(
                    f"SELECT key, value FROM entries WHERE namespace = ? AND key IN ({','.join('?' * len(chunk))})",
                    [namespace, *chunk],
                ).fetchall()
                found.update((k, json.loads(v)) for k, v in rows)
        return [found.get(k) for k in keys]

    def put(self, namespace: str, inputs: Any, value: Any) -> None:
        self.put_many(namespace, [(inputs, value)])

    def put_many(self, namespace: str, items: Iterable[tuple[Any, Any]]) -> None:
        rows = [(namespace, cache_key(i), json.dumps(v, ensure_ascii=False)) for i, v in items]
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?, ?)", rows)
            self._db.commit()

    def get_or_compute(self, namespace: str, inputs: Any, compute: Callable[[], Any]) -> Any:
        """The cached value for ``inputs``, computing and storing it on a miss."""
        value = self.get(namespace, inputs)
        if value is None:
            value = compute()
            self.put(namespace, inputs, value)
        return value

    def get_or_compute_many(
        self, namespace: str, inputs: Sequence[Any], compute: Callable[[list[Any]], list[Any]]
    ) -> list[Any]:
        """Like :meth:`get_or_compute`, but ``compute`` receives only the missing inputs, in one call."""
        values = self.get_many(namespace, inputs)
        missing = [i for i, v in enumerate(values) if v is None]
        if missing:
            computed = compute([inputs[i] for i in missing])
            self.put_many(namespace, zip([inputs[i] for i in missing], computed, strict=True))
            for i, v in zip(missing, computed, strict=True):
                values[i] = v
        return values

    def close(self) -> None:
        with self._lock:
            self._db.close()
