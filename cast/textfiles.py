"""Reading input files within bounds, so that a wrong, hostile or endless input is one error naming the file (and
line), found before anything is read where it can be.

- An input must be a regular file: a FIFO waits for a writer, and a device (``/dev/zero``) never ends, so both are
  refused before they are opened, as are folders and sockets.
- A file read whole has a size limit by kind (checked on its size before reading, and again while reading); a file
  read line by line (run, answers, collection files, standard input) a limit on each line.
- JSON is strict: UTF-8, no ``NaN`` or ``Infinity`` and only finite floats, integers of at most 4,300 digits (what
  Python converts), no lone surrogate (``"\\ud800"``: half of a UTF-16 pair, no text), nesting Python can parse.
- YAML (configs) is as strict, and also refuses a key given twice (the last would win unsaid) and aliases (``*a``,
  which a few hundred bytes can expand into gigabytes).

Each problem is a :class:`~cast.errors.DataFormatError` naming the file, and the line where it is known.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import os
import re
import stat
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, cast

from cast.errors import DataFormatError

MiB = 1 << 20
# The largest file of each kind read whole (the largest real ones are far smaller: CAsT and iKAT topics < 1 MB).
TOPICS_BYTES = 16 * MiB
CONFIG_BYTES = 1 * MiB
TABLE_BYTES = 256 * MiB  # qrels and rewrites (TSV)
RUN_JSON_BYTES = 256 * MiB  # an iKAT run file
# Small JSON files the toolkit writes itself (an index's build record, a sweep's manifest).
RECORD_BYTES = 16 * MiB
# The longest line of files read line by line: a run file's; an answers record, a prepared turn, a collection
# record (an article); a line typed to `cast answer` (its utterance is cut to 2,000 characters anyway).
RUN_LINE_BYTES = 1 * MiB
RECORD_LINE_BYTES = 256 * MiB
TYPED_LINE_BYTES = 64 * 1024
# The most digits of a JSON integer (Python's own limit for converting text to int).
MAX_DIGITS = 4300

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _open_regular(path: str | Path) -> IO[bytes]:
    """``path`` opened for reading, refused unless it is a regular file. Opened without waiting (``O_NONBLOCK``),
    so that a FIFO is found by ``fstat`` rather than waited on."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise DataFormatError(path, "no such file") from None
    except OSError as e:
        raise DataFormatError(path, f"cannot read it: {e.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = (
            "a folder"
            if stat.S_ISDIR(mode)
            else "a FIFO (named pipe)"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a regular file"
        )
        raise DataFormatError(
            path, f"is {kind}, not a file: give a regular file (save a stream to a file first)"
        )
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_bytes(path: str | Path, limit: int, what: str) -> bytes:
    """The whole content of the ``what`` file ``path``, refused if larger than ``limit`` bytes (before reading)."""
    with _open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        try:
            data = f.read(limit + 1) if size <= limit else b""  # it may have grown since
        except OSError as e:
            raise DataFormatError(path, f"cannot read it: {e.strerror}") from None
    if size > limit or len(data) > limit:
        raise DataFormatError(
            path,
            f"{max(size, len(data)):,} bytes, more than a {what} may have ({limit:,}); is it the right file?",
        )
    return data


def read_text(path: str | Path, limit: int, what: str) -> str:
    """A whole UTF-8 text file (see :func:`read_bytes`)."""
    data = read_bytes(path, limit, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise DataFormatError(
            path,
            f"not UTF-8 text (byte {data[e.start]:#04x} at line {line}, column {column}); save it as UTF-8",
        ) from None


def read_json(path: str | Path, limit: int, what: str) -> Any:
    """A whole JSON file, strictly parsed (see :func:`parse_json`)."""
    return parse_json(read_text(path, limit, what), path)


def parse_json(text: str | bytes, path: str | Path, line: int | None = None, what: str = "valid JSON") -> Any:
    """``text`` parsed as strict JSON (see the module docstring).

    Raises:
        DataFormatError: naming ``path`` (and ``line``, or the line in ``text``) and what is wrong.
    """
    try:
        value = json.loads(
            text, parse_constant=_refuse_constant, parse_int=_bounded_int, parse_float=_finite_float
        )
        if _SURROGATE_ESCAPE.search(text if isinstance(text, str) else text.decode("utf-8", "replace")):
            json.dumps(value, ensure_ascii=False).encode("utf-8")  # a lone surrogate cannot be encoded
    except json.JSONDecodeError as e:
        where = line if line is not None else e.lineno
        raise DataFormatError(path, f"not {what}: {e.msg} (column {e.colno})", where) from None
    except RecursionError:
        raise DataFormatError(path, f"not {what}: nested too deeply", line) from None
    except UnicodeEncodeError as e:  # a lone surrogate
        found = e.object[e.start : e.end]
        raise DataFormatError(
            path, f"not valid text: {found!r} is half of a UTF-16 pair alone", line
        ) from None
    except _Refused as e:
        raise DataFormatError(path, f"not {what}: {e}", line) from None
    return value


class _Refused(ValueError):
    """A JSON value that parses but is not allowed."""


def _refuse_constant(name: str) -> float:
    raise _Refused(f"{name} is not a number (only finite numbers are allowed)")


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_DIGITS:
        raise _Refused(f"an integer of {digits:,} digits (at most {MAX_DIGITS:,})")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"{text[:20]} is beyond the range of numbers (only finite numbers are allowed)")
    return value


def input_lines(
    path: str | Path, line_limit: int, gzipped: bool | None = None
) -> Iterator[tuple[int, bytes]]:
    """The lines of a file (gunzipped if ``gzipped``; None: where its name ends in ``.gz``) with their 1-based
    numbers, line ends kept, each at most ``line_limit`` bytes.

    Raises:
        DataFormatError: the file is not a regular file, a line is longer, or the gzip stream is damaged.
    """
    try:
        with _open_regular(path) as raw:
            if gzipped is None:
                gzipped = Path(path).name.endswith(".gz")
            stream = cast(IO[bytes], gzip.GzipFile(fileobj=raw)) if gzipped else raw
            yield from bounded_lines(stream, line_limit, path)
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise DataFormatError(path, f"not a readable gzip file ({e or type(e).__name__})") from None


def bounded_lines(
    stream: IO[bytes], line_limit: int, source: str | Path, before: Callable[[], None] | None = None
) -> Iterator[tuple[int, bytes]]:
    """The lines of ``stream`` (line ends kept) with their numbers; a line over ``line_limit`` bytes is an error
    naming ``source``, found after reading at most that many bytes. ``before`` is called before each line is read
    (a prompt)."""
    number = 0
    while True:
        if before is not None:
            before()
        line = stream.readline(line_limit + 1)
        if not line:
            return
        number += 1
        if len(line) > line_limit and not (len(line) == line_limit + 1 and line.endswith(b"\n")):
            raise DataFormatError(
                source, f"a line longer than {line_limit:,} bytes; is it the right file?", number
            )
        yield number, line


def utf8_lines(path: str | Path, line_limit: int = RECORD_LINE_BYTES) -> Iterator[tuple[int, str]]:
    """The lines of a UTF-8 text file (line ends kept) with their 1-based numbers (see :func:`input_lines`).

    Raises:
        DataFormatError: a line is not UTF-8 (e.g. a Latin-1 file), or too long; the message names the file and line.
    """
    for number, raw in input_lines(path, line_limit):
        yield number, _decode_line(raw, path, number)


def _decode_line(raw: bytes, source: str | Path, number: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataFormatError(
            source,
            f"not UTF-8 text (byte {raw[e.start]:#04x} at column {e.start + 1}); save it as UTF-8",
            number,
        ) from None


def json_lines(path: str | Path, line_limit: int = RECORD_LINE_BYTES) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON object of each non-blank line of a UTF-8 JSON-lines file, with its 1-based line number.

    Raises:
        DataFormatError: a line is not UTF-8, or not a JSON object; the message names the file and line.
    """
    for number, line in utf8_lines(path, line_limit):
        if line.strip():
            yield number, json_object(line, path, number)


def json_object(line: str | bytes, path: str | Path, number: int | None = None) -> dict[str, Any]:
    """One line parsed (:func:`parse_json`) as a JSON object."""
    record = parse_json(line, path, number, "a JSON object")
    if not isinstance(record, dict):
        raise DataFormatError(path, f"not a JSON object: found a {type(record).__name__}", number)
    return record


def read_yaml(path: str | Path, limit: int = CONFIG_BYTES, what: str = "config") -> Any:
    """A whole YAML file, strictly parsed (see :func:`parse_yaml`)."""
    return parse_yaml(read_text(path, limit, what), path)


def parse_yaml(text: str, source: str | Path) -> Any:
    """``text`` parsed as YAML (safe types only) without aliases, repeated keys or numbers that are not finite.

    Raises:
        DataFormatError: naming ``source`` and the line.
    """
    import yaml

    try:
        return yaml.load(text, Loader=_strict_loader())  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise DataFormatError(source, yaml_problem(e), None if mark is None else mark.line + 1) from None
    except RecursionError:
        raise DataFormatError(source, "its YAML is nested too deeply") from None
    except ValueError as e:  # an integer of more digits than Python converts
        raise DataFormatError(source, f"not valid YAML: {str(e).split(':')[0]}") from None


def yaml_problem(error: Exception) -> str:
    """What PyYAML found wrong, on one line (its message spans several and names ``"<unicode string>"``)."""
    problem = getattr(error, "problem", None) or str(error).strip().splitlines()[0]
    context = getattr(error, "context", None)
    return f"not valid YAML: {context}, {problem}" if context else f"not valid YAML: {problem}"


@functools.cache
def _strict_loader() -> Any:
    """A ``yaml.SafeLoader`` that refuses aliases, repeated keys and numbers that are not finite (built on first
    use: PyYAML is imported only where YAML is read)."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"aliases (*{event.anchor}) are not allowed: write the value out",
                    event.start_mark,
                )
            return super().compose_node(parent, index)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen = set()
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue  # SafeLoader refuses unhashable keys itself
                key = self.construct_object(key_node)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark
                    )
                seen.add(key)
            return super().construct_mapping(node, deep)

        def construct_finite_float(self, node: Any) -> float:
            value = self.construct_yaml_float(node)
            if not math.isfinite(value):
                raise yaml.constructor.ConstructorError(
                    None, None, f"{node.value} is not a finite number", node.start_mark
                )
            return value

    StrictLoader.add_constructor("tag:yaml.org,2002:float", StrictLoader.construct_finite_float)
    return StrictLoader
