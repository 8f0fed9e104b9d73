"""One on-disk cache for every expensive external call (entity linkers, knowledge-base look-ups, model outputs).

Entries live in a SQLite file, keyed by a namespace (what was called, e.g. ``"spotlight"``) and the sha256 of a
canonical JSON form of the call's inputs (e.g. endpoint, confidence, support, text). Values are JSON. A run that
stops halfway keeps everything it already paid for, and a rerun makes no repeated calls.

Several processes may share the file (WAL journal; a writer waits up to :data:`BUSY_TIMEOUT_S` for another). It
is only a cache, so faults cost recomputation, never a run: a damaged file (corrupted or truncated pages, not a
database, another schema) is moved aside to ``NAME.damaged`` and an empty cache started, with one warning; an
entry that is not JSON, or not of its namespace's shape, is recomputed (one warning per cache); an entry that cannot be stored because another process holds the write
lock too long is only not stored. A folder where the file should be is an error naming it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from cast.errors import CastError

log = logging.getLogger(__name__)

# How long a writer waits for another process's write lock (seconds): Ray workers share one cache file.
BUSY_TIMEOUT_S = 60.0
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS entries (namespace TEXT, key TEXT, value TEXT, PRIMARY KEY (namespace, key))"
)
_COLUMNS = ["namespace", "key", "value"]


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

    def __init__(self, path: str | Path | None, busy_timeout: float = BUSY_TIMEOUT_S):
        """``path=None`` gives an in-memory cache (nothing persists)."""
        self.path = None if path is None else Path(path).expanduser()
        self.busy_timeout = busy_timeout
        if self.path is not None:
            if self.path.is_dir():
                raise CastError(
                    f"the cache {self.path} is a folder, not a file; remove it, or set cache_dir to another folder"
                )
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._warned_entries = False  # a damaged cache may hold thousands of bad entries: one warning says it
        try:
            self._db = self._open()
        except sqlite3.OperationalError as e:
            raise self._unusable(e) from e
        except sqlite3.DatabaseError as e:
            self._db = self._rebuild(e)

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(
            ":memory:" if self.path is None else str(self.path),
            timeout=self.busy_timeout,
            check_same_thread=False,
        )
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(_SCHEMA)
            db.commit()
            columns = [row[1] for row in db.execute("PRAGMA table_info(entries)")]
            if columns != _COLUMNS:
                raise sqlite3.DatabaseError(f"table 'entries' has columns {columns}, expected {_COLUMNS}")
        except BaseException:
            db.close()
            raise
        return db

    def _rebuild(self, error: sqlite3.DatabaseError) -> sqlite3.Connection:
        """Move a damaged cache file aside and start an empty one (it is a cache: entries are recomputed)."""
        assert self.path is not None  # an in-memory database is never damaged
        aside = self.path.with_name(self.path.name + ".damaged")
        os.replace(self.path, aside)
        for suffix in ("-wal", "-shm"):  # the journal of the damaged file would be replayed into the new one
            self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)
        log.warning(
            "the cache %s was damaged (%s): moved it to %s and started an empty one; its entries will be recomputed",
            self.path,
            error,
            aside,
        )
        try:
            return self._open()
        except sqlite3.DatabaseError as e:
            raise self._unusable(e) from e

    def _unusable(self, error: sqlite3.Error) -> CastError:
        return CastError(
            f"cannot use the cache {self.path}: {error}; set cache_dir to a folder you can write, or wait for the "
            "process that holds it"
        )

    def _guarded(self, operation: Callable[[], Any]) -> Any:
        """Run ``operation`` on the database (under the lock); a damaged file is rebuilt and ``operation`` retried."""
        with self._lock:
            try:
                return operation()
            except sqlite3.OperationalError:
                raise  # busy, locked, I/O: the caller decides
            except sqlite3.DatabaseError as e:  # corrupt pages, "file is not a database"
                self._db.close()
                self._db = self._rebuild(e)
                return operation()

    def get(self, namespace: str, inputs: Any) -> Any | None:
        return self.get_many(namespace, [inputs])[0]

    def get_many(
        self, namespace: str, inputs: Sequence[Any], valid: Callable[[Any], bool] | None = None
    ) -> list[Any | None]:
        """Cached values for each of ``inputs`` (None where absent, or where the stored value is not JSON, or not
        ``valid``: of another shape than its namespace's values, as a damaged or foreign entry may be)."""
        keys = [cache_key(i) for i in inputs]

        def select() -> list[tuple[str, str]]:
            rows = []
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                rows += self._db.execute(
                    f"SELECT key, value FROM entries WHERE namespace = ? AND key IN ({','.join('?' * len(chunk))})",
                    [namespace, *chunk],
                ).fetchall()
            return rows

        try:
            rows = self._guarded(select)
        except sqlite3.OperationalError as e:
            raise self._unusable(e) from e
        found: dict[str, Any] = {}
        for key, value in rows:
            try:
                found[key] = json.loads(value)
                if valid is not None and not valid(found[key]):
                    raise ValueError("of another shape")
            except (TypeError, ValueError, RecursionError):
                found.pop(key, None)
                if not self._warned_entries:
                    self._warned_entries = True
                    log.warning(
                        "the cache %s holds values that are not JSON or of another shape (%s, and maybe more); "
                        "recomputing them",
                        self.path,
                        namespace,
                    )
        return [found.get(k) for k in keys]

    def put(self, namespace: str, inputs: Any, value: Any) -> None:
        self.put_many(namespace, [(inputs, value)])

    def put_many(self, namespace: str, items: Iterable[tuple[Any, Any]]) -> None:
        rows = [(namespace, cache_key(i), json.dumps(v, ensure_ascii=False)) for i, v in items]

        def insert() -> None:
            try:
                self._db.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?, ?)", rows)
                self._db.commit()
            except BaseException:
                self._db.rollback()
                raise

        try:
            self._guarded(insert)
        except sqlite3.OperationalError as e:
            # The value is computed and returned all the same; only a later run will compute it again.
            log.warning(
                "could not store %d %s entries in the cache %s: %s", len(rows), namespace, self.path, e
            )

    def get_or_compute(self, namespace: str, inputs: Any, compute: Callable[[], Any]) -> Any:
        """The cached value for ``inputs``, computing and storing it on a miss."""
        value = self.get(namespace, inputs)
        if value is None:
            value = compute()
            self.put(namespace, inputs, value)
        return value

    def get_or_compute_many(
        self,
        namespace: str,
        inputs: Sequence[Any],
        compute: Callable[[list[Any]], list[Any]],
        valid: Callable[[Any], bool] | None = None,
    ) -> list[Any]:
        """Like :meth:`get_or_compute`, but ``compute`` receives only the missing inputs, in one call; cached values
        that are not ``valid`` are computed again (see :meth:`get_many`)."""
        values = self.get_many(namespace, inputs, valid)
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
