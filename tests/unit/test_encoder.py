"""The sentence encoder's backends (cast/infra/encoder.py, the config's ``encoder`` section) without a model:
the export's key, the choice of backend and the setting's errors (the embeddings of the bundled
all-MiniLM-L6-v2: test_encoder_backends.py)."""

from __future__ import annotations

import json

import pytest

from cast.core.config import load_config
from cast.errors import ConfigError, ModelUnavailableError
from cast.infra.encoder import EncoderSettings, SentenceEncoder, export_folder, export_key
from cast.infra.resources import Resources


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


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
            "encoder: unknown setting(s) thread; allowed: backend, precision, quantize, threads",
        ),
        ("onnx", "encoder: expected a section (backend, quantize, threads, precision), got 'onnx'"),
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


@pytest.mark.parametrize(
    "section, device, message",
    [
        (
            {"backend": "onnx", "precision": "float16"},
            "cpu",
            "encoder.precision: float16 applies to backend torch",
        ),
        ({"backend": "torch", "precision": "bfloat16"}, "cpu", "encoder.precision bfloat16 is for a GPU"),
        (
            {"backend": "torch", "precision": "int4"},
            "cuda",
            "encoder.precision: 'int4' is not one of float32",
        ),
    ],
)
def test_a_halved_precision_is_for_torch_on_a_gpu(section, device, message):
    with pytest.raises(ConfigError, match=message):
        EncoderSettings.from_config(section).on(device)


def test_auto_on_a_gpu_keeps_the_precision():
    settings = EncoderSettings.from_config({"backend": "auto", "precision": "float16"})
    assert settings.on("cuda") == EncoderSettings("torch", "none", None, "float16")


def test_run_ahead_runs_in_order_with_preparation_ahead():
    from cast.infra.encoder import run_ahead

    prepared: list[int] = []

    def prepare(item: int) -> int:
        prepared.append(item)
        return item * 10

    results = run_ahead(range(7), prepare, lambda value: value + 1, workers=2)
    assert next(results) == 1
    assert list(results) == [11, 21, 31, 41, 51, 61]
    assert sorted(prepared) == list(range(7))
