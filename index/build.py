"""Build a Lucene index of a passage collection: Krovetz-stemmed, with positions, document vectors and raw text.

Two ways in, with the same analysis and stored fields:

* Pyserini JSON lines files (``.jsonl``, ``.jsonl.gz``; no duplicate list) go straight to Anserini's
  ``IndexCollection``, as Pyserini's own CLI does: Java reads them, in parallel over files.
* Every other format (and JSON lines with a duplicate list) is read with :mod:`index.collections` and fed to
  :func:`cast.jvm.indexer` in batches; a thread reads the next batch while Lucene indexes the current one (jnius
  releases the GIL during Java calls).

The index is built in a temporary sibling directory and renamed into place when complete, so an interrupted
build never leaves a partial index at the target path. Such a directory names the host and process that build
it; the next build of the same target removes those of processes that no longer run (killed builds).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import itertools
import json
import logging
import os
import queue
import re
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cast.errors import CastError, DataFormatError
from cast.jvm import STEMMERS
from cast.records import Passage
from index.collections import collection_formats, read_duplicates, read_passages

log = logging.getLogger(__name__)
T = TypeVar("T")


# What a build read, kept in the index folder (Lucene leaves files not named like its own alone): how many
# documents it holds, for `cast index embed` to check its inputs against without starting the JVM.
BUILD_RECORD = "cast-build.json"


@dataclass(frozen=True)
class IndexSummary:
    """What a build did.

    Attributes:
        indexed: passages written to the index.
        skipped: passages left out because their text is empty.
        seconds: wall-clock time of the build (reading, indexing and the final commit).
        path: the index directory.
        duplicates_left_out: passages left out because the duplicate list names them (``None``: no list).
    """

    indexed: int
    skipped: int
    seconds: float
    path: Path
    duplicates_left_out: int | None = None

    @property
    def passages_per_second(self) -> float:
        return self.indexed / self.seconds if self.seconds > 0 else 0.0


def raw_document(passage: Passage) -> str:
    """The JSON Lucene stores as the raw document (``id``, ``contents`` and ``title`` when there is one)."""
    fields = {"id": passage.id, "contents": passage.text}
    if passage.title:
        fields["title"] = passage.title
    return json.dumps(fields, ensure_ascii=False)


def build_index(
    inputs: str | Path | Iterable[str | Path],
    index_dir: str | Path,
    *,
    fmt: str | None = None,
    threads: int = 2,
    overwrite: bool = False,
    stemmer: str = "krovetz",
    duplicates: str | Path | None = None,
    batch_size: int = 5000,
    progress: bool = True,
) -> IndexSummary:
    """Index the passages of ``inputs`` into ``index_dir``.

    Args:
        inputs: collection files or directories (see :func:`index.collections.read_passages`).
        index_dir: where the index goes; it must not exist or be empty unless ``overwrite``.
        fmt: the input format (one of :data:`index.collections.FORMATS`); ``None`` detects it per file.
        threads: Anserini's indexing threads (JSON lines files are indexed in parallel over files).
        overwrite: replace an existing index at ``index_dir`` (only once the new one is complete).
        stemmer: ``krovetz`` (the toolkit's retrieval assumes it), ``porter`` or ``none``.
        duplicates: a CAsT duplicate list whose listed duplicates are left out.
        batch_size: passages handed to the JVM per call (formats read in Python).
        progress: show a tqdm progress bar.

    Returns:
        the counts and time of the build.

    Raises:
        CastError: ``index_dir`` holds something and ``overwrite`` is false, or holds something other than a
            Lucene index; ``threads`` or ``batch_size`` is below 1; the inputs hold no passage with text.
        DataFormatError: an input is malformed, or a passage id occurs twice (nothing is left at ``index_dir``
            then).
    """
    target = Path(index_dir).expanduser()
    _check_target(target, overwrite)
    if stemmer not in STEMMERS:
        raise CastError(f"unknown stemmer {stemmer!r}; choose one of: {', '.join(STEMMERS)}")
    if threads < 1:
        raise CastError(f"--threads must be at least 1, got {threads}")
    if batch_size < 1:
        raise CastError(f"the batch size must be at least 1, got {batch_size}")
    formats = collection_formats(inputs, fmt)
    files = [path for path, _ in formats]
    # JSON lines files go to Anserini's IndexCollection, which reads .jsonl and .jsonl.gz as our reader does.
    direct = duplicates is None and all(
        file_format == "jsonl" and path.name.endswith((".jsonl", ".jsonl.gz"))
        for path, file_format in formats
    )
    dropped = read_duplicates(duplicates) if duplicates else frozenset()
    left_out: list[str] = []

    from tqdm import tqdm

    started = time.perf_counter()
    building = _building_dir(target)
    try:
        with tqdm(
            desc=f"indexing {target.name}", unit=" passages", disable=not progress, mininterval=2
        ) as bar:
            if direct:
                indexed, skipped = _index_json_lines(
                    files, building, stemmer=stemmer, threads=threads, bar=bar
                )
            else:
                passages = read_passages(files, fmt, dropped, left_out)
                indexed, skipped = _index_passages(passages, building, stemmer, threads, batch_size, bar)
        if not indexed:
            raise CastError(
                f"no passage with text in {', '.join(map(str, files))} ({skipped:,} empty); nothing to index"
            )
        record = {
            "documents": indexed,
            "empty": skipped,
            "inputs": [str(f.resolve()) for f in files],
            "stemmer": stemmer,  # queries must be analysed alike: runs refuse another one
        }
        if duplicates:
            record["duplicates"] = str(Path(duplicates).resolve())
            record["duplicates_left_out"] = len(left_out)
        _finish(building, target, record)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    summary = IndexSummary(
        indexed, skipped, time.perf_counter() - started, target, len(left_out) if duplicates else None
    )
    log.info(
        "indexed %d passages (%d empty skipped) into %s in %.1f s", indexed, skipped, target, summary.seconds
    )
    return summary


def merge_indexes(
    shards: Sequence[str | Path], index_dir: str | Path, *, overwrite: bool = False
) -> IndexSummary:
    """Merge indexes built separately by :func:`build_index` (shards of a collection too large for one build:
    one per machine, or per part of the collection) into one index at ``index_dir``.

    Lucene's ``IndexWriter.addIndexes`` copies the shards' segments (postings, positions, document vectors, raw
    text) without analysing anything again, and Lucene reads collection statistics from the whole index at
    search time, so the merged index ranks as one built from all the inputs at once.

    Raises:
        CastError: fewer than two shards; a shard is not an index built by this toolkit; the shards were built with
            different stemmers or share an input file; ``index_dir`` holds something and ``overwrite`` is false.
    """
    from cast import jvm

    target = Path(index_dir).expanduser()
    if len(shards) < 2:
        raise CastError(f"give at least two shards to merge, got {len(shards)}")
    _check_target(target, overwrite)
    folders = [jvm.check_index(shard) for shard in shards]
    records = []
    for folder in folders:
        record = build_record(folder)
        if record is None:
            raise CastError(f"{folder} has no {BUILD_RECORD}: merge indexes built by `cast index build`")
        records.append(record)
    stemmers = {r.get("stemmer", "krovetz") for r in records}
    if len(stemmers) > 1:
        raise CastError(
            f"the shards were built with different stemmers ({', '.join(sorted(stemmers))}): rebuild them alike"
        )
    seen: dict[str, Path] = {}
    for folder, record in zip(folders, records, strict=True):
        for path in record["inputs"]:
            if path in seen:
                raise CastError(
                    f"{path} was indexed into both {seen[path]} and {folder}: a passage would be found twice"
                )
            seen[path] = folder
    started = time.perf_counter()
    building = _building_dir(target)
    try:
        jvm.start()
        from jnius import autoclass

        def directory(path: Path) -> Any:
            return autoclass("org.apache.lucene.store.FSDirectory").open(
                autoclass("java.io.File")(str(path)).toPath()
            )

        config = autoclass("org.apache.lucene.index.IndexWriterConfig")()
        writer = autoclass("org.apache.lucene.index.IndexWriter")(directory(building), config)
        try:
            writer.addIndexes(*(directory(folder) for folder in folders))  # Java varargs: one argument each
            writer.commit()
        finally:
            writer.close()
        repeated = _repeated_id(directory(building))
        if repeated is not None:  # every run would list the passage twice, and trec_eval refuse the run file
            raise CastError(
                f"passage id {repeated!r} is in more than one shard: a merged index must hold each passage once; "
                "rebuild the shards from inputs that do not overlap"
            )
        merged = {
            "documents": sum(r["documents"] for r in records),
            "empty": sum(r.get("empty", 0) for r in records),
            "inputs": list(seen),
            "stemmer": stemmers.pop(),
            "shards": [str(folder.resolve()) for folder in folders],
        }
        _finish(building, target, merged)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return IndexSummary(merged["documents"], merged["empty"], time.perf_counter() - started, target, None)


def _repeated_id(directory: Any) -> str | None:
    """A passage id that more than one document of the index in ``directory`` (a Lucene ``Directory``) has, or
    None: the ids are counted once, in Lucene's term dictionary (about 10 s per million passages); a second pass
    names one only if the count falls short."""
    from jnius import autoclass, cast

    reader = autoclass("org.apache.lucene.index.DirectoryReader").open(directory)
    try:
        terms = autoclass("org.apache.lucene.index.MultiTerms").getTerms(
            cast("org.apache.lucene.index.IndexReader", reader), "id"
        )
        if terms is None:
            return None
        found = terms.iterator()
        unique = 0
        while found.next() is not None:
            unique += 1
        if unique == reader.numDocs():
            return None
        found = terms.iterator()
        while (term := found.next()) is not None:
            if found.docFreq() > 1:
                return str(term.utf8ToString())
        return None
    finally:
        reader.close()


def _check_target(target: Path, overwrite: bool) -> None:
    """Refuse an index path that is a file, or holds something that ``overwrite`` does not allow replacing."""
    if target.exists() and not target.is_dir():
        raise CastError(f"{target} is a file, not an index directory; choose another --index path")
    if target.is_dir() and any(target.iterdir()):
        if not overwrite:
            raise CastError(f"{target} already exists and is not empty; pass --overwrite to replace it")
        # A Lucene index, maybe half-built (its lock without a commit); anything else may be someone's files.
        if not any(p.name.startswith("segments_") or p.name == "write.lock" for p in target.iterdir()):
            raise CastError(
                f"{target} holds files but no Lucene index, so --overwrite does not replace it; remove it "
                "yourself or choose another --index path"
            )


def _building_dir(target: Path) -> Path:
    """A fresh folder beside ``target`` to build in (named after this host and process, so that one left by a
    killed build is found and removed)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_killed_builds(target)
    return Path(
        tempfile.mkdtemp(
            prefix=f".{target.name}.building-{socket.gethostname()}-{os.getpid()}-", dir=target.parent
        )
    )


def _finish(building: Path, target: Path, record: dict[str, Any]) -> None:
    """Record how the index was built and move it into place."""
    (building / BUILD_RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    building.chmod(0o777 & ~_umask())  # mkdtemp's 0700 would keep the index from other users
    _replace(building, target)


def _index_passages(
    passages: Iterator[Passage], index_dir: Path, stemmer: str, threads: int, batch_size: int, bar: Any
) -> tuple[int, int]:
    """Feed ``passages`` to a ``LuceneIndexer``; the numbers of passages indexed and of empty ones skipped."""
    from cast import jvm

    indexer = jvm.indexer(index_dir, stemmer=stemmer, threads=threads)
    indexed = skipped = 0
    for raw, empty in _read_ahead(_raw_batches(passages, batch_size)):
        if raw:
            indexer.add_batch_raw(raw)
        indexed += len(raw)
        skipped += empty
        bar.update(len(raw))
    indexer.close()
    return indexed, skipped


def _index_json_lines(
    files: list[Path], index_dir: Path, *, stemmer: str, threads: int, bar: Any
) -> tuple[int, int]:
    """Index Pyserini JSON lines files with Anserini's ``IndexCollection``, as Pyserini's CLI does.

    ``IndexCollection`` drops a file it cannot parse without reporting an error, and indexes a repeated passage
    id twice; so the files are read here too while Java indexes them (their records counted and checked), Java's
    own error output is held back, and its counts are checked against the records.

    Returns:
        the numbers of passages indexed and of empty ones skipped.
    """
    from cast import jvm

    jvm.start()
    from jnius import autoclass, detach

    # IndexCollection reads a folder: link the files into one, numbered to keep their order.
    inputs = Path(tempfile.mkdtemp(prefix=f"{index_dir.name}.input-", dir=index_dir.parent))
    try:
        for number, path in enumerate(files):
            (inputs / f"{number:05d}-{path.name}").symlink_to(path.resolve())
        args = autoclass("io.anserini.index.IndexCollection$Args")()
        autoclass("org.kohsuke.args4j.CmdLineParser")(args).parseArgument(
            *["-collection", "JsonCollection", "-generator", "DefaultLuceneDocumentGenerator",
              "-input", str(inputs), "-index", str(index_dir), "-threads", str(threads), "-stemmer", stemmer,
              "-storePositions", "-storeDocvectors", "-storeRaw"]
        )  # fmt: skip
        indexer = autoclass("io.anserini.index.IndexCollection")(args)
        counters = indexer.getCounters()
        failures: list[BaseException] = []

        def run() -> None:
            try:
                indexer.run()
            except BaseException as e:
                failures.append(e)
            finally:
                detach()

        thread = threading.Thread(target=run, name="anserini-index", daemon=True)
        with _java_errors_held() as java_errors:
            thread.start()
            try:
                # While Java indexes: raises DataFormatError naming a malformed record or a repeated id.
                bar.total = records = sum(1 for _ in read_passages(files, "jsonl"))
            except DataFormatError:
                thread.join()  # Java's files must be closed before the build folder is removed
                raise
            while thread.is_alive():
                thread.join(timeout=1.0)
                bar.update(counters.indexed.get() - bar.n)
        if failures:
            raise failures[0]
    finally:
        shutil.rmtree(inputs, ignore_errors=True)
    indexed, empty = counters.indexed.get(), counters.empty.get()
    if indexed + empty != records:
        said = next((line for line in java_errors().splitlines() if line.strip()), "nothing")
        raise CastError(
            f"Anserini indexed {indexed:,} and skipped {empty:,} empty of the {records:,} records of "
            f"{', '.join(map(str, files))} (it said: {said.strip()}); rerun with -v for its log"
        )
    return indexed, empty


@contextlib.contextmanager
def _java_errors_held() -> Iterator[Callable[[], str]]:
    """Hold back what Java prints on ``System.err`` and logs through Anserini (a stack trace per record it
    cannot read, which :func:`_index_json_lines` reports in one line instead); yields a function giving the
    held text. With logging at INFO (``cast -v``) nothing is held back."""
    if log.isEnabledFor(logging.INFO):
        yield lambda: ""
        return
    from jnius import autoclass

    system = autoclass("java.lang.System")
    level = autoclass("org.apache.logging.log4j.Level")
    configurator = autoclass("org.apache.logging.log4j.core.config.Configurator")
    held = autoclass("java.io.ByteArrayOutputStream")()
    stderr = system.err
    system.setErr(autoclass("java.io.PrintStream")(held, True, "UTF-8"))
    configurator.setLevel("io.anserini.index", level.OFF)
    try:
        yield lambda: held.toString("UTF-8")
    finally:
        configurator.setLevel("io.anserini.index", level.WARN)
        system.setErr(stderr)


def _raw_batches(passages: Iterator[Passage], size: int) -> Iterator[tuple[list[str], int]]:
    """Batches of raw documents to index, each with the number of empty passages left out of it."""
    while batch := list(itertools.islice(passages, size)):
        raw = [raw_document(p) for p in batch if p.text.strip()]
        yield raw, len(batch) - len(raw)


@dataclass(frozen=True)
class _Failure:
    error: BaseException


def _read_ahead(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    """``items``, produced up to ``depth`` ahead by a background thread; its exceptions are raised here."""
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    end = object()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(item):
                    return
        except BaseException as e:
            put(_Failure(e))
            return
        put(end)

    thread = threading.Thread(target=produce, name="read-passages", daemon=True)
    thread.start()
    try:
        while (item := ready.get()) is not end:
            if isinstance(item, _Failure):
                raise item.error
            yield item
    finally:
        stop.set()
        thread.join()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _remove_killed_builds(target: Path) -> None:
    """Remove the build directories of ``target`` left by processes of this host that no longer run."""
    pattern = re.compile(rf"\.{re.escape(target.name)}\.building-(.+)-(\d+)-[^-]+$")
    for path in target.parent.glob(f".{glob.escape(target.name)}.building-*"):
        found = pattern.match(path.name.split(".input-")[0])
        if found and found[1] == socket.gethostname() and not _running(int(found[2])):
            log.info("removing %s, left by a build that was killed", path)
            shutil.rmtree(path, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _replace(built: Path, target: Path) -> None:
    """Move the finished index to ``target``, removing what was there only after the new one is in place."""
    if not target.exists():
        os.replace(built, target)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    os.replace(target, old / target.name)
    os.replace(built, target)
    shutil.rmtree(old, ignore_errors=True)


def build_record(index_dir: str | Path) -> dict[str, Any] | None:
    """What :func:`build_index` recorded of the build of ``index_dir`` (``documents``, ``empty``, ``inputs``,
    ``stemmer``, ``duplicates``), or ``None`` for an index built otherwise.

    Raises:
        DataFormatError: the record is not one (damaged, or edited by hand).
    """
    from cast.textfiles import RECORD_BYTES, read_json

    path = Path(index_dir).expanduser() / BUILD_RECORD
    if not path.is_file():
        return None
    fix = (
        f"rebuild the index with `{index_command(index_dir, 'build')}`, or delete the file (it only records how "
        "the index was built)"
    )
    try:
        record = read_json(path, RECORD_BYTES, "build record")
    except DataFormatError as e:
        raise DataFormatError(path, f"{e.problem}; {fix}") from None
    # Records of older builds may lack the optional ones.
    required, optional = {"documents": int, "inputs": list}, {"empty": int, "stemmer": str}
    wrong = (
        [key for key, kind in required.items() if not isinstance(record.get(key), kind)]
        + [key for key, kind in optional.items() if key in record and not isinstance(record[key], kind)]
        if isinstance(record, dict)
        else ["all"]
    )
    if wrong or not all(isinstance(i, str) for i in record["inputs"]):
        raise DataFormatError(
            path, f"not a build record (wrong or missing: {', '.join(wrong or ['inputs'])}); {fix}"
        )
    return record


def index_command(index_dir: str | Path, verb: str) -> str:
    """The ``cast index build`` (or ``embed``) command that builds ``index_dir`` again, from the inputs its build
    recorded where they can be read (else ``FILES...``), to give as advice that works when followed literally."""
    import shlex

    from cast.textfiles import RECORD_BYTES, read_json

    try:
        record = read_json(Path(index_dir).expanduser() / BUILD_RECORD, RECORD_BYTES, "build record")
        inputs = [shlex.quote(i) for i in record["inputs"] if isinstance(i, str)] or ["FILES..."]
        extra = [f"--duplicates {shlex.quote(record['duplicates'])}"] if record.get("duplicates") else []
        if verb == "build" and record.get("stemmer", "krovetz") != "krovetz":
            extra.append(f"--stemmer {shlex.quote(record['stemmer'])}")
    except (DataFormatError, TypeError, KeyError, AttributeError):
        inputs, extra = ["FILES..."], []
    return " ".join(
        [
            "cast index",
            verb,
            "--input",
            *inputs,
            "--index",
            shlex.quote(str(index_dir)),
            *extra,
            "--overwrite",
        ]
    )


def index_identity(index_dir: str | Path) -> str:
    """What identifies an index's content, for outputs made from it to record and check (a run resumed, or
    prepared turns finished, with another index would mix two collections): its passage count and a digest of its
    files' names and sizes and of its build record. Its path is left out, so that a copied index is the same."""
    folder = Path(index_dir).expanduser()
    try:
        files = sorted(
            (f.name, f.stat().st_size) for f in folder.iterdir() if f.is_file() and f.name != "write.lock"
        )
        built = (folder / BUILD_RECORD).read_bytes() if (folder / BUILD_RECORD).is_file() else b""
    except OSError:
        return "unreadable"
    digest = hashlib.sha256(json.dumps(files).encode() + built).hexdigest()[:16]
    record = build_record(folder)
    return f"{record['documents']} passages, {digest}" if record else digest


def index_stats(index_dir: str | Path) -> dict[str, int]:
    """Lucene's statistics of an index (documents, terms...) and its size on disk in bytes.

    Raises:
        IndexUnavailableError: there is no readable index at ``index_dir``.
    """
    from cast import jvm

    path = jvm.check_index(index_dir)
    stats = {name: int(value) for name, value in jvm.index_reader(str(path)).stats().items()}
    stats["bytes_on_disk"] = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
    return stats
