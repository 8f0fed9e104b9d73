"""Reading input files within bounds, so that a wrong, hostile or endless input is one error naming the file (and
line), found before anything is read where it can be.

- An input must be a regular file: a FIFO waits for a writer, and a device (``/dev/zero``) never ends, so both are
  refused before they are opened, as are folders and sockets.
- A file read whole has a size limit by kind (checked on its size before reading, and again while reading); a file
  read line by line (run, answers, collection files, standard input) a limit on each line, and some kinds (qrels,
  rewrites, TREC RAG and iKAT 2025 files) a limit on the whole too.
- Lines end at ``\\n`` only (:func:`input_lines`, the one line reader): a JSON record escapes ``\\n`` inside its
  strings but not U+2028 or U+0085, which ``str.splitlines`` takes for line ends too (and passages hold them).
- Text is decoded once, by :func:`decode_text`: UTF-8, a byte-order mark at the start of a file dropped (editors on
  Windows write one; left in, it would become part of the first qid), a UTF-16 or UTF-32 one refused, and a NUL
  refused (no text holds one: it is a binary file, or a damaged one).
- JSON is strict: UTF-8, no ``NaN`` or ``Infinity`` and only finite floats, integers of at most 4,300 digits (what
  Python converts), no lone surrogate (``"\\ud800"``: half of a UTF-16 pair, no text), no key given twice in one
  object (the last would win unsaid), nesting Python can parse.
- YAML (configs) is as strict, and also refuses aliases (``*a``, which a few hundred bytes can expand into
  gigabytes).

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
TABLE_BYTES = 256 * MiB  # qrels and rewrites (TSV, read line by line)
RUN_JSON_BYTES = 256 * MiB  # an iKAT run file, a TREC RAG one
# Small JSON files the toolkit writes itself (an index's build record, a sweep's manifest).
RECORD_BYTES = 16 * MiB
# The longest line of files read line by line: a run file's, a qrels or rewrites file's; an answers record, a
# prepared turn, a collection record (an article); a line typed to `cast answer` (its utterance is cut to 2,000
# characters anyway).
RUN_LINE_BYTES = 1 * MiB
TABLE_LINE_BYTES = 1 * MiB
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
    _check_size(path, max(size, len(data)), limit, what)
    return data


def _check_size(path: str | Path, size: int, limit: int, what: str) -> None:
    if size > limit:
        raise DataFormatError(
            path, f"{size:,} bytes, more than a {what} may have ({limit:,}); is it the right file?"
        )


def read_text(path: str | Path, limit: int, what: str) -> str:
    """A whole text file (see :func:`read_bytes` and :func:`decode_text`)."""
    return decode_text(read_bytes(path, limit, what), path)


_UTF8_BOM = b"\xef\xbb\xbf"
# The byte-order marks of UTF-16 LE (and UTF-32 LE), UTF-16 BE and UTF-32 BE.
_OTHER_BOMS = (b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")


def decode_text(data: bytes, source: str | Path, line: int | None = None) -> str:
    """``data``, the whole of ``source`` (``line`` None) or its line ``line``, as text: UTF-8 without NUL; at the
    start of the file a UTF-8 byte-order mark is dropped, and a UTF-16 or UTF-32 one refused.

    Raises:
        DataFormatError: naming ``source`` and where (line and column) the first wrong byte is.
    """
    if line is None or line == 1:
        if data.startswith(_UTF8_BOM):
            data = data[len(_UTF8_BOM) :]
        elif data.startswith(_OTHER_BOMS):
            raise DataFormatError(
                source,
                "UTF-16 or UTF-32 text (it starts with such a byte-order mark); save it as UTF-8",
                line,
            )
    nul = data.find(b"\0")
    if nul >= 0:
        raise DataFormatError(
            source,
            f"a NUL byte {_position(data, nul, line)}: not text (a binary file, or a damaged one?)",
            line,
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataFormatError(
            source,
            f"not UTF-8 text (byte {data[e.start]:#04x} {_position(data, e.start, line)}); save it as UTF-8",
            line,
        ) from None


def _position(data: bytes, offset: int, line: int | None) -> str:
    """Where byte ``offset`` of ``data`` is: its column in a line, its line and column in a whole file."""
    if line is not None:
        return f"at column {offset + 1}"
    number = data.count(b"\n", 0, offset) + 1
    column = offset - data.rfind(b"\n", 0, offset)
    return f"at line {number}, column {column}"


def read_json(path: str | Path, limit: int, what: str) -> Any:
    """A whole JSON file, strictly parsed (see :func:`parse_json`)."""
    return parse_json(read_text(path, limit, what), path)


def parse_json(text: str, path: str | Path, line: int | None = None, what: str = "valid JSON") -> Any:
    """``text`` parsed as strict JSON (see the module docstring).

    Raises:
        DataFormatError: naming ``path`` (and ``line``, or the line in ``text``) and what is wrong.
    """
    try:
        value = json.loads(
            text,
            object_pairs_hook=_unique_keys,
            parse_constant=_refuse_constant,
            parse_int=_bounded_int,
            parse_float=_finite_float,
        )
        if _SURROGATE_ESCAPE.search(text):
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


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    record = dict(pairs)
    if len(record) < len(pairs):
        keys = [key for key, _ in pairs]
        twice = next(key for number, key in enumerate(keys) if key in keys[:number])
        raise _Refused(f"key {twice!r} appears twice in one object (which one counts?)")
    return record


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
    path: str | Path,
    line_limit: int,
    gzipped: bool | None = None,
    file_limit: int | None = None,
    what: str = "file",
) -> Iterator[tuple[int, bytes]]:
    """The lines of a file (gunzipped if ``gzipped``; None: where its name ends in ``.gz``) with their 1-based
    numbers, each ending at ``\\n`` (kept) and at most ``line_limit`` bytes; with ``file_limit``, at most that many
    bytes in all (the ``what`` file's limit, checked on its size before reading).

    Raises:
        DataFormatError: the file is not a regular file, it or a line is longer, or the gzip stream is damaged.
    """
    try:
        with _open_regular(path) as raw:
            if gzipped is None:
                gzipped = Path(path).name.endswith(".gz")
            if file_limit is not None:
                _check_size(path, os.fstat(raw.fileno()).st_size, file_limit, what)
            stream = cast(IO[bytes], gzip.GzipFile(fileobj=raw)) if gzipped else raw
            read = 0
            for number, line in bounded_lines(stream, line_limit, path):
                read += len(line)
                if file_limit is not None:
                    _check_size(path, read, file_limit, what)
                yield number, line
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise DataFormatError(path, f"not a readable gzip file ({e or type(e).__name__})") from None


def bounded_lines(
    stream: IO[bytes], line_limit: int, source: str | Path, before: Callable[[], None] | None = None
) -> Iterator[tuple[int, bytes]]:
    """The lines of ``stream`` (each ending at ``\\n``, kept) with their numbers; a line over ``line_limit`` bytes
    is an error naming ``source``, found after reading at most that many bytes. ``before`` is called before each
    line is read (a prompt)."""
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


def utf8_lines(
    path: str | Path,
    line_limit: int = RECORD_LINE_BYTES,
    *,
    gzipped: bool | None = None,
    file_limit: int | None = None,
    what: str = "file",
) -> Iterator[tuple[int, str]]:
    """The lines of a text file (line ends kept) with their 1-based numbers (see :func:`input_lines`), each decoded
    by :func:`decode_text`.

    Raises:
        DataFormatError: a line is not UTF-8 (e.g. a Latin-1 file), holds a NUL, or is too long; the message names
            the file and line.
    """
    for number, raw in input_lines(path, line_limit, gzipped, file_limit, what):
        yield number, decode_text(raw, path, number)


def json_values(
    path: str | Path,
    line_limit: int = RECORD_LINE_BYTES,
    *,
    gzipped: bool | None = None,
    file_limit: int | None = None,
    what: str = "file",
) -> Iterator[tuple[int, Any]]:
    """The JSON value of each non-blank line of a JSON-lines file (:func:`utf8_lines`, :func:`parse_json`), with its
    1-based line number."""
    for number, line in utf8_lines(path, line_limit, gzipped=gzipped, file_limit=file_limit, what=what):
        if line.strip():
            yield number, parse_json(line, path, number)


def json_lines(
    path: str | Path, line_limit: int = RECORD_LINE_BYTES, *, gzipped: bool | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON object of each non-blank line of a JSON-lines file, with its 1-based line number.

    Raises:
        DataFormatError: a line is not UTF-8, or not a JSON object; the message names the file and line.
    """
    for number, line in utf8_lines(path, line_limit, gzipped=gzipped):
        if line.strip():
            yield number, json_object(line, path, number)


def json_object(line: str, path: str | Path, number: int | None = None) -> dict[str, Any]:
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
