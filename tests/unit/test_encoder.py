"""The sentence encoder's backends (cast/infra/encoder.py, the config's ``encoder`` section): ONNX and OpenVINO exports
of the bundled all-MiniLM-L6-v2 give torch's embeddings within tolerance, an export is built once and found again
by its key, and the setting's errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cast.core.config import load_config
from cast.core.resources import Resources
from cast.errors import ConfigError, ModelUnavailableError
from cast.infra.cache import Cache
from cast.infra.encoder import EncoderSettings, SentenceEncoder, export_folder, export_key

SENTENCES = [
    "How do planets orbit the Sun?",
    "Marie Curie discovered polonium and radium in 1898.",
    "Glasgow lies on the River Clyde.",
    "a",
    "The quick brown fox jumps over the lazy dog. " * 40,  # past the 64-token limit: truncated alike
]


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("encoders")


@pytest.fixture(scope="module")
def torch_vectors(one_torch_thread):
    return SentenceEncoder(None, "cpu", 64).embed(SENTENCES, batch_size=2)


@pytest.mark.parametrize(
    "backend, quantize, min_cosine",
    [("onnx", "none", 0.9999), ("openvino", "none", 0.9999), ("onnx", "int8", 0.98)],
)
def test_exported_backends_give_torchs_embeddings(torch_vectors, exports, backend, quantize, min_cosine):
    encoder = SentenceEncoder(None, "cpu", 64, EncoderSettings(backend, quantize, threads=1), exports)
    # batch 2: batches of different lengths and padding, in another order than the texts'
    vectors = encoder.embed(SENTENCES, batch_size=2)
    assert vectors.shape == torch_vectors.shape and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = (vectors * torch_vectors).sum(axis=1)
    assert cosines.min() > min_cosine, cosines
    if quantize == "none":
        np.testing.assert_allclose(vectors, torch_vectors, atol=1e-4)
    assert encoder.embed([]).shape == (0, encoder.dimension)


@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_a_texts_embedding_does_not_depend_on_the_texts_encoded_with_it(exports, quantize):
    # int8 runs scale activations by the run's range: batched, a text's vector would change with its company
    encoder = SentenceEncoder(None, "cpu", 64, EncoderSettings("onnx", quantize, threads=1), exports)
    together = encoder.embed(SENTENCES, batch_size=8)
    alone = np.stack([encoder.embed([text])[0] for text in SENTENCES])
    if quantize == "int8":
        np.testing.assert_array_equal(together, alone)
    else:
        np.testing.assert_allclose(together, alone, atol=1e-5)


def test_an_export_is_built_once_and_found_again(exports, capfd):
    settings = EncoderSettings("onnx", threads=1)
    SentenceEncoder(None, "cpu", 64, settings, exports)  # built here or by the test above
    capfd.readouterr()
    again = SentenceEncoder(None, "cpu", 64, settings, exports)
    assert "exporting" not in capfd.readouterr().err
    folders = [
        p for p in exports.iterdir() if p.name.startswith("all-MiniLM-L6-v2-onnx-") and "int8" not in p.name
    ]
    assert len(folders) == 1 and not any(p.name.startswith(".") for p in exports.iterdir())
    assert json.loads((folders[0] / "export.json").read_text())["backend"] == "onnx"
    assert again.embed(["x"]).shape == (1, 384)


def test_a_missing_export_is_built_with_a_message(tmp_path, capfd):
    SentenceEncoder(None, "cpu", 64, EncoderSettings("onnx", threads=1), tmp_path)
    message = capfd.readouterr().err.strip().splitlines()
    assert message == [f"cast: exporting all-MiniLM-L6-v2 to onnx (once) into {next(tmp_path.iterdir())}"]


def test_the_export_key_follows_the_model_files_the_backend_and_its_options(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    key = export_key(model, "onnx", "none")
    folder = export_folder(tmp_path, "my/model", key)
    assert folder.parent == tmp_path and folder.name.startswith("model-onnx-")
    assert export_folder(tmp_path, "my/model", export_key(model, "onnx", "none")) == folder
    assert export_folder(tmp_path, "my/model", export_key(model, "onnx", "int8")).name.startswith(
        "model-onnx-int8-"
    )
    others = {
        export_folder(tmp_path, "my/model", export_key(model, b, q))
        for b, q in [("openvino", "none"), ("onnx", "int8")]
    }
    assert folder not in others and len(others) == 2
    (model / "model.safetensors").write_bytes(b"new weights")
    assert export_folder(tmp_path, "my/model", export_key(model, "onnx", "none")) != folder


def test_quantised_embeddings_are_cached_apart_from_exact_ones(exports):
    cache = Cache(None)
    texts = SENTENCES[:2]
    SentenceEncoder(None, "cpu", 64).cached_embeddings(texts, cache)
    entries = lambda: cache._db.execute("SELECT COUNT(*) FROM entries").fetchone()[0]  # noqa: E731
    assert entries() == 2
    SentenceEncoder(None, "cpu", 64, EncoderSettings("onnx", threads=1), exports).cached_embeddings(
        texts, cache
    )
    assert entries() == 2  # float32 ONNX equals torch: it reads torch's entries
    SentenceEncoder(None, "cpu", 64, EncoderSettings("onnx", "int8", 1), exports).cached_embeddings(
        texts, cache
    )
    assert entries() == 4


@pytest.mark.parametrize(
    "section, message",
    [
        ({"backend": "tpu"}, "encoder.backend: unknown backend 'tpu'; use auto, torch, onnx, openvino"),
        ({"backend": "onnx", "quantize": "int4"}, "encoder.quantize: 'int4' is not one of none, int8"),
        ({"backend": "torch", "quantize": "int8"}, "encoder.quantize: int8 applies to backend onnx"),
        ({"backend": "openvino", "quantize": "int8"}, "encoder.quantize: int8 applies to backend onnx"),
        ({"backend": "onnx", "threads": 0}, "encoder.threads: expected a positive whole number, got 0"),
        ({"backend": "onnx", "threads": "two"}, "encoder.threads: expected a positive whole number"),
        (
            {"backend": "onnx", "thread": 2},
            "encoder: unknown setting(s) thread; allowed: backend, quantize, threads",
        ),
        ("onnx", "encoder: expected a section (backend, quantize, threads), got 'onnx'"),
    ],
)
def test_the_settings_errors_name_the_setting(section, message):
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        EncoderSettings.from_config(section)


def test_auto_is_onnx_on_a_cpu_and_torch_on_a_gpu_and_exported_backends_stay_on_the_cpu():
    assert EncoderSettings.from_config(None) == EncoderSettings("torch", "none", None)
    auto = EncoderSettings.from_config({"backend": "auto", "quantize": "int8"})
    assert auto.on("cpu") == EncoderSettings("onnx", "int8")
    assert auto.on("cuda") == EncoderSettings("torch", "none")
    with pytest.raises(ConfigError, match="encoder.backend openvino runs on the CPU, but the device is cuda"):
        EncoderSettings("openvino").on("cuda")


def test_a_wrong_setting_in_the_config_stops_before_any_model_loads():
    config = load_config("offline", ["encoder.backend=tpu", "device=cpu"])
    with pytest.raises(ConfigError, match="encoder.backend: unknown backend 'tpu'"):
        Resources(config).sentence_encoder(None, 256)


def test_a_model_the_export_cannot_reproduce_is_refused(tmp_path):
    (tmp_path / "modules.json").write_text(
        json.dumps(
            [
                {"type": "sentence_transformers.models.Transformer"},
                {"type": "sentence_transformers.models.Pooling"},
            ]
        )
    )
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    with pytest.raises(
        ModelUnavailableError, match="export transformer \\+ mean pooling models.*use encoder.backend=torch"
    ):
        SentenceEncoder(str(tmp_path), "cpu", 64, EncoderSettings("onnx"), tmp_path / "exports")
