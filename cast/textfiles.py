"""Reading line-based UTF-8 input files so that a wrong encoding or line is one error naming the file and line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def json_lines(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON object of each non-blank line of a UTF-8 JSON-lines file, with its 1-based line number.

    Raises:
        DataFormatError: a line is not UTF-8, or not a JSON object; the message names the file and line.
    """
    for number, line in utf8_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataFormatError(path, f"not a JSON object: {e}", number) from None
        except RecursionError:
            raise DataFormatError(path, "not a JSON object: nested too deeply", number) from None
        if not isinstance(record, dict):
            raise DataFormatError(
                path, f"a record must be a JSON object, found a {type(record).__name__}", number
            )
        yield number, record
