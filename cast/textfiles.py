"""Reading line-based UTF-8 input files so that a wrong encoding is one error naming the file and line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from cast.errors import DataFormatError


def utf8_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """The lines of a UTF-8 text file (line ends kept) with their 1-based numbers.

    Raises:
        DataFormatError: a line is not UTF-8 (e.g. a Latin-1 file); the message names the file and line.
    """
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataFormatError(
                    path,
                    f"not UTF-8 text (byte {raw[e.start]:#04x} at column {e.start + 1}); save it as UTF-8",
                    number,
                ) from None
