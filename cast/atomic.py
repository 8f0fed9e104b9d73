"""Writing files so that a reader never sees half of one: write a temporary sibling, then rename it into place."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary sibling of ``path`` to write; renamed to ``path`` on success, removed on failure.

    The temporary name keeps the suffix, so writers that choose a format by suffix (matplotlib) still can.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.partial{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_lines_atomic(path: str | Path, lines: Iterable[str]) -> None:
    """Write ``lines`` (newlines included) to ``path`` atomically and durably."""
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as f:
        f.writelines(lines)
        f.flush()
        os.fsync(f.fileno())


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically and durably."""
    write_lines_atomic(path, [text])
