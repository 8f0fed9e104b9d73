"""The sentence encoder's backends on the bundled all-MiniLM-L6-v2: ONNX and OpenVINO exports give torch's
embeddings within tolerance, and an export is built once and found again by its key."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_encoder import offline  # noqa: F401  (fixtures)

from cast.infra.cache import Cache
from cast.infra.encoder import EncoderSettings, SentenceEncoder

SENTENCES = [
    "How do planets orbit the Sun?",
    "Marie Curie discovered polonium and radium in 1898.",
    "Glasgow lies on the River Clyde.",
    "a",
    "The quick brown fox jumps over the lazy dog. " * 40,  # past the 64-token limit: truncated alike
]


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
    # int8 runs scale activations by the run's range, and padding moves float32 vectors in their 7th digit:
    # batched, a text's vector would change with its company. ONNX runs one text per run, two side by side here.
    encoder = SentenceEncoder(None, "cpu", 64, EncoderSettings("onnx", quantize, threads=2), exports)
    together = encoder.embed(SENTENCES, batch_size=8)
    alone = np.stack([encoder.embed([text])[0] for text in SENTENCES])
    np.testing.assert_array_equal(together, alone)


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


def test_an_export_that_cannot_be_loaded_is_moved_aside_and_built_again(exports, tmp_path, caplog):
    import shutil

    settings = EncoderSettings("onnx", threads=1)
    SentenceEncoder(None, "cpu", 64, settings, exports)  # built here or by the tests above
    # the exact export (not the int8 one, whose name starts alike)
    built = next(
        p for p in exports.iterdir() if p.name.startswith("all-MiniLM-L6-v2-onnx-") and "int8" not in p.name
    )
    copy = tmp_path / built.name
    shutil.copytree(built, copy)
    model = copy / "model.onnx"
    model.write_bytes(model.read_bytes()[:100_000])  # cut short: a disk that filled while it was copied, say
    with caplog.at_level("WARNING"):
        encoder = SentenceEncoder(None, "cpu", 64, settings, tmp_path)
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert f"the onnx export {copy} could not be loaded" in warning and "exporting again" in warning
    assert (tmp_path / f"{built.name}.damaged" / "model.onnx").stat().st_size == 100_000
    np.testing.assert_allclose(
        encoder.embed(SENTENCES[:2]), SentenceEncoder(None, "cpu", 64, settings, exports).embed(SENTENCES[:2])
    )


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


def test_torch_gives_sentence_transformers_own_embeddings(torch_vectors):
    """The toolkit's torch pipeline (Rust tokenizer on threads, batches longest first) against
    sentence-transformers' ``encode`` on the same model: the same inputs, the same vectors."""
    encoder = SentenceEncoder(None, "cpu", 64)
    reference = encoder.model.model.encode(SENTENCES, batch_size=2, normalize_embeddings=True)
    np.testing.assert_allclose(torch_vectors, reference, atol=1e-6)
    features = encoder.model.features(SENTENCES[:3])
    expected = encoder.model.model.preprocess(SENTENCES[:3])
    assert sorted(features) == ["attention_mask", "input_ids", "token_type_ids"]
    for name, values in features.items():
        assert values.tolist() == expected[name].tolist(), name


def test_a_stream_of_chunks_gives_each_chunks_embeddings_in_order(torch_vectors):
    encoder = SentenceEncoder(None, "cpu", 64)
    chunks = [SENTENCES[:2], [], SENTENCES[2:], SENTENCES[1:2]]
    streamed = list(encoder.embed_stream(iter(chunks), batch_size=2))
    assert [len(v) for v in streamed] == [2, 0, 3, 1]
    np.testing.assert_allclose(np.concatenate(streamed[:3]), torch_vectors, atol=1e-6)
    np.testing.assert_allclose(streamed[3], torch_vectors[1:2], atol=1e-6)
