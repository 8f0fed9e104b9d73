"""Writing files so that a reader never sees half of one: write a temporary sibling, then rename it into place.

Temporary files get an unpredictable name and are created exclusively (``O_EXCL``, ``O_NOFOLLOW``): a symbolic
link planted at a guessable name would otherwise make us write through it, into the link's target.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

# Opens a file we create for writing without following a symbolic link at its name.
CREATE_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A new, empty temporary sibling of ``path`` to write; renamed to ``path`` on success, removed on failure.

    The temporary name keeps the suffix, so writers that choose a format by suffix (matplotlib) still can.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = path.with_name(f".{path.stem}.{secrets.token_hex(4)}.partial{path.suffix}")
        try:
            os.close(os.open(tmp, CREATE_NEW, 0o666))
            break
        except FileExistsError:  # taken (by chance, or by a planted link): draw another name
            continue
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def append_durably(path: str | Path, text: str) -> None:
    """Append ``text`` to ``path`` (created if absent) and make it durable; a symbolic link at ``path`` is refused
    (``OSError`` ELOOP), so that a planted link cannot redirect the write."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def write_lines_atomic(path: str | Path, lines: Iterable[str]) -> None:
    """Write ``lines`` (newlines included) to ``path`` atomically and durably."""
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as f:
        f.writelines(lines)
        f.flush()
        os.fsync(f.fileno())


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically and durably."""
    write_lines_atomic(path, [text])
