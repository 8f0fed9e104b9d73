"""Passage embeddings computed ahead of time: a store beside an index that the bi-encoder re-ranker reads.

Dense retrieval practice: embed the collection once (on a GPU where there is one), look vectors up per query.
The store of an index ``DIR`` is the folder ``DIR.embeddings`` (:func:`store_path`):

* ``manifest.json``: format version, the encoder's settings (model, max_seq_length, with_title), dimension,
  count, chunk size, the input files, and ``complete``, true only once every file below is in place;
* ``embeddings.npy``: float16 ``[count, dimension]`` unit-length rows, memory-mapped when read;
* ``docids.txt``: the passage id of each row, one a line;
* ``text_hashes.npy``: uint64 ``[count]``, the :func:`fingerprint` of the exact text embedded. A row is used only
  for a passage whose text has the same fingerprint, so an index built from another version of the collection
  never gets another text's vector;
* ``id_hashes.npy`` and ``id_rows.npy``: the fingerprints of the passage ids, sorted, and the row of each: a
  binary search finds a passage's row with nothing loaded (a dict of 820k ids takes seconds and 100+ MB).

While building, each chunk of passages is written (atomically) as ``parts/part-NNNNNN.npz``; an interrupted build
resumes after the last complete part, and the parts are joined into the files above at the end.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import shutil
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from cast.core.registry import build_stage
from cast.errors import CastError, ConfigError, DataFormatError
from cast.formats.textfiles import RECORD_BYTES, read_json
from cast.index.collections import collection_formats, read_duplicates, read_passages
from cast.index.record import index_command
from cast.infra.atomic import atomic_path, write_lines_atomic, write_text_atomic
from cast.infra.cluster import RayOptions, map_in_order
from cast.infra.resources import Resources
from cast.infra.text import passage_text

T = TypeVar("T")
log = logging.getLogger(__name__)

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
PARTS = "parts"


@dataclass(frozen=True)
class EmbeddingSettings:
    """What decides a passage's vector: the encoder, its length limit, and whether the title is prefixed."""

    model: str
    max_seq_length: int
    with_title: bool


@dataclass(frozen=True)
class EmbeddingSummary:
    """What a build did.

    Attributes:
        embedded: passages embedded by this run.
        resumed: passages an earlier, interrupted run had embedded.
        count: passages in the complete store.
        seconds: wall-clock time of this run.
        path: the store folder.
    """

    embedded: int
    resumed: int
    count: int
    seconds: float
    path: Path

    @property
    def passages_per_second(self) -> float:
        return self.embedded / self.seconds if self.seconds > 0 else 0.0


def store_path(index_dir: str | Path) -> Path:
    """Where the passage-embedding store of an index lives: the sibling folder ``<index>.embeddings``."""
    index_dir = Path(index_dir).expanduser()
    return index_dir.with_name(f"{index_dir.name}.embeddings")


def fingerprint(text: str) -> int:
    """A 64-bit hash (BLAKE2b) of a passage id or of the text a vector was computed from."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


class PassageEmbeddings:
    """A complete store, read-only: unit-length vectors looked up by passage id.

    Use :meth:`open`; rows are read from the memory-mapped matrix only when looked up.
    """

    def __init__(self, path: Path, manifest: dict[str, Any]):
        self.path = path
        self.manifest = manifest
        try:
            self.vectors = np.load(path / "embeddings.npy", mmap_mode="r")
            self.text_hashes = np.load(path / "text_hashes.npy", mmap_mode="r")
            self.id_hashes = np.load(path / "id_hashes.npy", mmap_mode="r")
            self.id_rows = np.load(path / "id_rows.npy", mmap_mode="r")
        except (OSError, ValueError) as e:  # a truncated or overwritten array file: numpy's own words
            raise CastError(
                f"the passage-embedding store {path} is damaged ({e}); rebuild it with `{rebuild_command(path)}`"
            ) from e
        sizes = {len(self.vectors), len(self.text_hashes), len(self.id_hashes), len(self.id_rows)}
        if sizes != {manifest["count"]}:
            raise CastError(
                f"the passage-embedding store {path} is inconsistent (its files hold {sorted(sizes)} rows, the "
                f"manifest says {manifest['count']}); rebuild it with `{rebuild_command(path)}`"
            )

    @classmethod
    def open(cls, path: str | Path) -> PassageEmbeddings:
        """The complete store at ``path``.

        Raises:
            CastError: there is no store at ``path``, it is incomplete, or of another format version.
        """
        path = Path(path).expanduser()
        manifest = read_manifest(path)
        if manifest is None:
            raise CastError(
                f"no passage-embedding store at {path} (no {MANIFEST}); build one with `cast index embed`"
            )
        if manifest.get("format") != FORMAT_VERSION:
            raise CastError(
                f"the passage-embedding store {path} has format {manifest.get('format')!r}, this toolkit reads "
                f"{FORMAT_VERSION}; rebuild it with `{rebuild_command(path)}`"
            )
        if not manifest.get("complete"):
            raise CastError(
                f"the passage-embedding store {path} is incomplete (an interrupted build); run the same "
                "`cast index embed` command again to finish it"
            )
        return cls(path, manifest)

    def mismatch(self, settings: EmbeddingSettings, dimension: int) -> str | None:
        """What differs between this store and an encoder with ``settings`` (``None``: nothing)."""
        wanted = {**asdict(settings), "dimension": dimension}
        differences = [
            f"{key} {self.manifest.get(key)!r} (re-ranker: {value!r})"
            for key, value in wanted.items()
            if self.manifest.get(key) != value
        ]
        return ", ".join(differences) or None

    def lookup(self, docids: Sequence[str], texts: Sequence[str]) -> tuple[Any, Any]:
        """The stored vectors of the passages ``docids``, where the text embedded for them is ``texts``.

        Args:
            docids: passage ids.
            texts: the text the re-ranker embeds for each (:func:`cast.rank.rerank.passage_text`); a passage whose
                stored text fingerprint differs is reported not found.

        Returns:
            a float32 array ``[len(docids), dimension]`` (zero rows where not found) and a boolean array saying
            which rows were found.
        """
        vectors = np.zeros((len(docids), self.vectors.shape[1]), dtype=np.float32)
        found = np.zeros(len(docids), dtype=bool)
        if not len(self.id_hashes):
            return vectors, found
        wanted = np.array([fingerprint(docid) for docid in docids], dtype=np.uint64)
        positions = np.minimum(np.searchsorted(self.id_hashes, wanted), len(self.id_hashes) - 1)
        rows = np.asarray(self.id_rows[positions])
        for i in np.flatnonzero(self.id_hashes[positions] == wanted):
            found[i] = int(self.text_hashes[rows[i]]) == fingerprint(texts[int(i)])
        vectors[found] = self.vectors[rows[found]]
        return vectors, found


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest of the store at ``path``, or ``None`` where there is none."""

    file = path / MANIFEST
    if not file.is_file():
        return None
    try:
        manifest = read_json(file, RECORD_BYTES, "store manifest")
    except DataFormatError as e:
        raise CastError(f"{e}; rebuild the store with `{rebuild_command(path)}`") from None
    if not isinstance(manifest, dict):
        raise CastError(f"{file}: not a JSON object; rebuild the store with `{rebuild_command(path)}`")
    return manifest


def rebuild_command(store: Path) -> str:
    """The ``cast index embed`` command that builds the store ``store`` (``<index>.embeddings``) again."""

    index = store.with_name(store.name.removesuffix(".embeddings"))
    return index_command(index, "embed")


def store_for_reranker(
    setting: str | None, index: str | None, settings: EmbeddingSettings, dimension: int
) -> PassageEmbeddings | None:
    """The store a bi-encoder re-ranker reads, per its ``embeddings`` setting.

    Args:
        setting: ``auto``: the store beside ``index``, used if it exists, is complete and matches ``settings``
            (otherwise one warning says why it is not used); ``none`` (or ``None``): no store; any other value: the
            path of a store, which must be complete and match.
        index: the configured index folder, if any.
        settings: the re-ranker's encoder settings, which the store's must equal.
        dimension: the encoder's embedding dimension.

    Raises:
        ConfigError: an explicit store path is missing, incomplete or built with other settings.
    """
    if setting is None or setting == "none":
        return None
    if setting == "auto":
        if not index or not (path := store_path(index)).exists():
            return None
        try:
            store = PassageEmbeddings.open(path)
        except CastError as e:
            log.warning("not using precomputed passage embeddings: %s", e)
            return None
        if problem := store.mismatch(settings, dimension):
            log.warning(
                "not using the precomputed passage embeddings at %s: built with %s; rebuild them with "
                "`cast index embed --overwrite` and this config's reranker settings",
                path,
                problem,
            )
            return None
        return store
    try:
        store = PassageEmbeddings.open(setting)
    except CastError as e:
        raise ConfigError(f"reranker.embeddings: {e}") from e
    if problem := store.mismatch(settings, dimension):
        raise ConfigError(
            f"reranker.embeddings: the store at {store.path} was built with {problem}; rebuild it with "
            "`cast index embed --overwrite`, or set reranker.embeddings=auto to ignore it"
        )
    return store


@dataclass(frozen=True)
class EmbeddingChunk:
    """One part's passages: ``size`` read from the collection, of which those with text have ``ids`` and
    ``texts`` (the text embedded)."""

    size: int
    ids: tuple[str, ...]
    texts: tuple[str, ...]


@dataclass(frozen=True)
class _ChunkEmbedder:
    """The vectors of a chunk's texts, checked to be ``[len(texts), dimension]`` float32."""

    embed: Callable[[list[str]], Any]
    dimension: int

    def __call__(self, chunk: EmbeddingChunk) -> np.ndarray:
        if not chunk.texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self.checked(chunk, self.embed(list(chunk.texts)))

    def checked(self, chunk: EmbeddingChunk, vectors: Any) -> np.ndarray:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(chunk.texts), self.dimension):
            raise CastError(
                f"the encoder returned vectors of shape {vectors.shape}, expected "
                f"({len(chunk.texts)}, {self.dimension})"
            )
        return vectors

    def stream(self, chunks: Iterator[EmbeddingChunk]) -> Iterator[tuple[EmbeddingChunk, np.ndarray]]:
        """``(chunk, vectors)`` for each chunk, in order: through the encoder's own ``stream`` where it has one
        (:class:`RerankerEncoder`: the device kept busy from one chunk to the next), else chunk by chunk. The
        chunks are read on a thread of their own, ahead of the encoder."""
        stream = getattr(self.embed, "stream", None)
        if stream is None:
            yield from ((chunk, self(chunk)) for chunk in chunks)
            return
        read: deque[EmbeddingChunk] = deque()

        def texts() -> Iterator[tuple[str, ...]]:
            for chunk in read_ahead(chunks):
                read.append(chunk)
                yield chunk.texts

        for vectors in stream(texts()):
            chunk = read.popleft()
            yield chunk, self.checked(chunk, vectors)


def read_ahead(items: Iterator[T], ahead: int = 2) -> Iterator[T]:
    """The items of ``items``, produced on a thread of their own up to ``ahead`` in advance (an error there is
    raised here)."""
    import queue
    import threading

    slots: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=ahead)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                slots.put((True, item))
            slots.put((False, None))
        except BaseException as error:  # handed to the consumer
            slots.put((False, error))

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        while True:
            more, item = slots.get()
            if not more:
                if item is not None:
                    raise item
                return
            yield item
    finally:
        stop.set()
        while producer.is_alive():  # let a blocked producer finish its put and see the stop
            try:
                slots.get_nowait()
            except queue.Empty:
                producer.join(0.05)


class RerankerEncoder:
    """The passage encoder of a config's bi-encoder re-ranker, built where it is first used (on a Ray worker:
    there, once), so that only the config travels.

    Args:
        config: the pipeline config (its ``device``, ``encoder`` and ``cache_dir`` apply).
        section: the ``reranker`` section to build.
    """

    def __init__(self, config: dict[str, Any], section: dict[str, Any]):
        self.config = config
        self.section = section
        self._reranker: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_reranker": None}

    @property
    def reranker(self) -> Any:
        if self._reranker is None:
            self._reranker = build_stage("reranker", self.section, Resources(self.config))
        return self._reranker

    def __call__(self, texts: list[str]) -> Any:
        return self.reranker.embed(texts)

    def stream(self, chunks: Iterable[Sequence[str]]) -> Iterator[Any]:
        """The embeddings of each chunk, the device kept busy across chunks (in this process)."""
        return self.reranker.embed_stream(chunks)


def build_embeddings(
    inputs: str | Path | Iterable[str | Path],
    store_dir: str | Path,
    settings: EmbeddingSettings,
    embed: Callable[[list[str]], Any],
    dimension: int,
    *,
    fmt: str | None = None,
    duplicates: str | Path | None = None,
    index_documents: int | None = None,
    chunk_size: int = 2048,
    overwrite: bool = False,
    progress: bool = True,
    ray: RayOptions | None = None,
) -> EmbeddingSummary:
    """Embed the passages of ``inputs`` into the store ``store_dir``, resuming an interrupted build.

    Passages with empty text are left out, as the index leaves them out.

    Args:
        inputs: the collection files or directories the index was built from (see
            :func:`cast.index.collections.read_passages`).
        store_dir: the store folder (:func:`store_path` of the index).
        settings: the encoder's settings, recorded in the manifest; the text embedded is
            :func:`cast.rank.rerank.passage_text` with ``settings.with_title``.
        embed: unit-length float32 embeddings ``[len(texts), dimension]`` of a list of texts; with ``ray``, a
            picklable object that loads its model where it is first called (:class:`RerankerEncoder`).
        dimension: the embedding dimension.
        fmt: the input format (``None``: detected per file).
        duplicates: the CAsT duplicate list the index was built with (its passages are left out here too).
        index_documents: the number of documents of the index; the passages with text of ``inputs`` must be
            as many (``None``: not checked).
        chunk_size: passages per part file; an interruption loses at most one chunk's work.
        overwrite: discard a store (complete or not) already at ``store_dir``.
        progress: show a tqdm progress bar.
        ray: embed the chunks on Ray workers (the collection is read, and the parts written, here); the store
            is the same.

    Raises:
        CastError: a store at ``store_dir`` was built from other inputs or with other settings (and not
            ``overwrite``), or its parts are damaged; the inputs do not hold ``index_documents`` passages.
        DataFormatError: an input is missing or malformed.
    """
    if chunk_size < 1:
        raise CastError(f"the chunk size must be at least 1, got {chunk_size}")
    started = time.perf_counter()
    store_dir = Path(store_dir).expanduser()
    files = [path for path, _ in collection_formats(inputs, fmt)]
    dropped = read_duplicates(duplicates) if duplicates else frozenset()
    manifest = {
        "format": FORMAT_VERSION,
        **asdict(settings),
        "dimension": dimension,
        "chunk_size": chunk_size,
        "inputs": [_file_record(path) for path in files],
        "count": None,
        "complete": False,
    }
    if duplicates:  # only when given: stores made before this setting existed still match
        manifest["duplicates"] = _file_record(Path(duplicates))
    total, with_text = _count_passages(files, fmt, dropped)
    if index_documents is not None and with_text != index_documents:
        raise CastError(
            f"the inputs hold {with_text:,} passages with text ({', '.join(map(str, files))}), the index "
            f"{index_documents:,}: give --input (and --duplicates) as the index was built with"
        )
    if overwrite and store_dir.exists():
        shutil.rmtree(store_dir)
    existing = read_manifest(store_dir)
    if existing is not None:
        _check_same_build(store_dir, existing, manifest)
        if existing["complete"]:
            log.info("the passage-embedding store %s is already complete", store_dir)
            return EmbeddingSummary(
                0, existing["count"], existing["count"], time.perf_counter() - started, store_dir
            )
    elif store_dir.exists() and any(store_dir.iterdir()):
        raise CastError(f"{store_dir} holds files but no {MANIFEST}; pass --overwrite to replace it")
    parts_dir = store_dir / PARTS
    parts_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(store_dir / MANIFEST, json.dumps(manifest, indent=2) + "\n")

    done = _part_files(parts_dir)
    resumed = 0
    for part in done:
        with np.load(part) as data:
            resumed += len(data["hashes"])
    passages = itertools.islice(read_passages(files, fmt, dropped), len(done) * chunk_size, None)

    def chunks() -> Iterator[EmbeddingChunk]:
        while chunk := list(itertools.islice(passages, chunk_size)):
            kept = [p for p in chunk if p.text.strip()]
            texts = tuple(passage_text(p, settings.with_title) for p in kept)
            yield EmbeddingChunk(len(chunk), tuple(p.id for p in kept), texts)

    embedded = _write_parts(
        parts_dir,
        chunks(),
        embed,
        dimension,
        first=len(done),
        total=total,
        chunk_size=chunk_size,
        progress=progress,
        ray=ray,
    )
    count = _assemble(store_dir, manifest)
    seconds = time.perf_counter() - started
    log.info("embedded %d passages (%d resumed) into %s in %.1f s", embedded, resumed, store_dir, seconds)
    return EmbeddingSummary(embedded, resumed, count, seconds, store_dir)


def _count_passages(files: list[Path], fmt: str | None, dropped: frozenset[str]) -> tuple[int, int]:
    """How many passages ``files`` hold (the duplicates ``dropped`` left out), and how many of them have text."""
    total = with_text = 0
    for passage in read_passages(files, fmt, dropped):
        total += 1
        with_text += bool(passage.text.strip())
    return total, with_text


def _write_parts(
    parts_dir: Path,
    chunks: Iterator[EmbeddingChunk],
    embed: Callable[[list[str]], Any],
    dimension: int,
    *,
    first: int,
    total: int,
    chunk_size: int,
    progress: bool,
    ray: RayOptions | None,
) -> int:
    """Embed ``chunks`` into the part files numbered from ``first`` (the parts before it were written by an
    interrupted build); return how many passages were embedded."""
    from tqdm import tqdm

    embedded = 0
    with tqdm(
        desc=f"embedding {parts_dir.parent.name}",
        unit=" passages",
        total=total,
        initial=min(first * chunk_size, total),
        disable=not progress,
        smoothing=0.1,
    ) as bar:
        # Parts are written here, in order, whether the vectors come from this process or from Ray workers.
        embedder = _ChunkEmbedder(embed, dimension)
        embedded_chunks = embedder.stream(chunks) if ray is None else map_in_order(embedder, chunks, ray)
        for number, (chunk, vectors) in enumerate(embedded_chunks, start=first):
            with atomic_path(parts_dir / f"part-{number:06d}.npz") as tmp, tmp.open("wb") as file:
                np.savez(
                    file,
                    embeddings=vectors.astype(np.float16),
                    docids=np.array(chunk.ids, dtype=str),
                    hashes=np.array([fingerprint(t) for t in chunk.texts], dtype=np.uint64),
                )
            embedded += len(chunk.texts)
            bar.update(chunk.size)
    return embedded


def _file_record(path: Path) -> dict[str, Any]:
    """How the manifest names an input file: its absolute path and size."""
    return {"path": str(path.resolve()), "bytes": path.stat().st_size}


def _check_same_build(store_dir: Path, existing: dict[str, Any], wanted: dict[str, Any]) -> None:
    """A store being resumed (or found complete) must come from the same inputs and settings."""
    keys = [key for key in {**existing, **wanted} if key not in ("count", "complete")]
    if existing.get("format") == FORMAT_VERSION and existing.get("complete"):
        keys.remove("chunk_size")  # only matters while resuming
    differences = [
        f"{key} {_shown(existing.get(key))} (now {_shown(wanted.get(key))})"
        for key in keys
        if existing.get(key) != wanted.get(key)
    ]
    if differences:
        raise CastError(
            f"the passage-embedding store {store_dir} was started with {'; '.join(differences)}; run the same "
            "command as then to resume it (--chunk-size, --input, --duplicates, --set reranker.*), or pass "
            "--overwrite to discard it and start again"
        )


def _shown(value: Any) -> str:
    """A manifest value as an error message shows it: input files by path and size, other values as they are."""
    if isinstance(value, list):
        return ", ".join(_shown(item) for item in value) or "none"
    if isinstance(value, dict) and "path" in value:
        return f"{value['path']} ({value.get('bytes', 0):,} bytes)"
    return "none" if value is None else str(value)


def _part_files(parts_dir: Path) -> list[Path]:
    """The complete parts, checked to be numbered 0, 1, 2... without a gap."""
    parts = sorted(parts_dir.glob("part-*.npz"))
    expected = [parts_dir / f"part-{n:06d}.npz" for n in range(len(parts))]
    if parts != expected:
        raise CastError(
            f"the parts in {parts_dir} are not numbered without gaps; pass --overwrite to start again"
        )
    return parts


def _assemble(store_dir: Path, manifest: dict[str, Any]) -> int:
    """Join the parts into the store's files, mark it complete, and remove the parts; the number of rows."""
    parts = _part_files(store_dir / PARTS)
    docids: list[str] = []
    hashes = []
    for part in parts:
        with np.load(part) as data:
            docids.extend(data["docids"].tolist())
            hashes.append(data["hashes"])
    count = len(docids)
    with atomic_path(store_dir / "embeddings.npy") as tmp:
        matrix = np.lib.format.open_memmap(
            tmp, mode="w+", dtype=np.float16, shape=(count, manifest["dimension"])
        )
        row = 0
        for part in parts:
            with np.load(part) as data:
                block = data["embeddings"]
                matrix[row : row + len(block)] = block
                row += len(block)
        matrix.flush()
        del matrix
    id_hashes = np.array([fingerprint(docid) for docid in docids], dtype=np.uint64)
    order = np.argsort(id_hashes, kind="stable")
    arrays = {
        "text_hashes": np.concatenate(hashes) if hashes else np.zeros(0, dtype=np.uint64),
        "id_hashes": id_hashes[order],
        "id_rows": order.astype(np.int64),
    }
    for name, array in arrays.items():
        with atomic_path(store_dir / f"{name}.npy") as tmp:
            np.save(tmp, array)
    write_lines_atomic(store_dir / "docids.txt", (f"{docid}\n" for docid in docids))
    manifest = {**manifest, "count": count, "complete": True}
    write_text_atomic(store_dir / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    shutil.rmtree(store_dir / PARTS)
    return count
