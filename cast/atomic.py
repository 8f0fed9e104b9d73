"""Writing files so that a reader never sees half of one: write a temporary sibling, then rename it into place.

Temporary files get an unpredictable name and are created exclusively (``O_EXCL``, ``O_NOFOLLOW``): a symbolic
link planted at a guessable name would otherwise make us write through it, into the link's target.
"""

from __future__ import annotations

import glob
import os
import re
import secrets
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

# What the names of temporary files have before the target's suffix.
PARTIAL = ".partial"
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
        tmp = path.with_name(f".{path.stem}.{secrets.token_hex(4)}{PARTIAL}{path.suffix}")
        try:
            os.close(os.open(tmp, CREATE_NEW, 0o666))
            break
        except FileExistsError:  # taken (by chance, or by a planted link): draw another name
            continue
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as e:
        if e.filename is None:  # a full disk while writing: name the file being written
            e.filename = str(path)
        raise
    finally:
        tmp.unlink(missing_ok=True)


def remove_leftovers(path: str | Path) -> None:
    """Remove the temporary files of :func:`atomic_path` for ``path`` that a killed writer left (a ``kill -9``
    runs no clean-up). Only for a writer that holds the lock guarding ``path``: another one's would be in use."""
    path = Path(path)
    pattern = re.compile(rf"\.{re.escape(path.stem)}\.[0-9a-f]{{8}}{re.escape(PARTIAL + path.suffix)}")
    for sibling in path.parent.glob(f".{glob.escape(path.stem)}.*{PARTIAL}*"):
        if pattern.fullmatch(sibling.name) and not sibling.is_symlink():
            sibling.unlink(missing_ok=True)


def check_writable(path: str | Path, option: str) -> Path:
    """``path``, a file to write later: refused now, before the work that makes it, if it names a folder or its
    folder cannot be made or written (``option`` names the argument that gave it, for the message).

    Raises:
        CastError: saying why, and what to give instead.
    """
    from cast.errors import CastError

    given = str(path)
    path = Path(path)
    if given.endswith(("/", os.sep)) or path.is_dir():
        raise CastError(
            f"{option} {given} is a folder; give a file name in it, e.g. {path / 'prepared.jsonl.gz'}"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):  # created and removed: the folder is writable
            pass
    except OSError as e:
        raise CastError(f"cannot write {option} {given}: {e.strerror} ({e.filename or path.parent})") from e
    return path


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
