"""Precomputed passage embeddings (index/embeddings.py, `cast index embed`) with the bundled all-MiniLM-L6-v2:
the store holds what the re-ranker would embed, an interrupted build resumes, re-ranking with the store scores
as without it, a mismatching store is not used, and the CLI's errors."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from cast.cli import main as cast_main
from cast.core.records import Passage, ScoredPassage
from cast.core.registry import build_stage
from cast.errors import CastError, ConfigError
from cast.index.build import build_index
from cast.index.collections import read_passages
from cast.index.embeddings import (
    EmbeddingSettings,
    PassageEmbeddings,
    build_embeddings,
    store_for_reranker,
    store_path,
)
from cast.infra.resources import Resources
from cast.infra.text import passage_text

QUERY = "how do planets orbit the Sun?"


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def collection(fixtures: Path) -> Path:
    """Seven passages, two of them empty (left out of the index and of the store)."""
    return fixtures / "index" / "passages.jsonl"


@pytest.fixture(scope="module")
def encoder(one_torch_thread):
    """The bundled MiniLM as the offline config's re-ranker builds it, reading no store."""
    return build_stage("reranker", {"name": "biencoder", "embeddings": "none"}, Resources({"device": "cpu"}))


@pytest.fixture(scope="module")
def passages(collection: Path) -> list[Passage]:
    return [p for p in read_passages(collection) if p.text.strip()]


def build(collection: Path, store: Path, encoder, embed=None, **kwargs):
    return build_embeddings(
        collection,
        store,
        encoder.embedding_settings,
        embed or encoder.embed,
        encoder.embedding_dimension,
        progress=False,
        **kwargs,
    )


def ranking(passages: list[Passage]) -> list[ScoredPassage]:
    return [ScoredPassage(p, -float(i), -float(i), i + 1) for i, p in enumerate(passages)]


def test_store_holds_what_the_reranker_embeds(collection, encoder, passages, tmp_path):
    summary = build(collection, tmp_path / "ix.embeddings", encoder, chunk_size=3)
    assert (summary.embedded, summary.resumed, summary.count) == (5, 0, 5)

    store = PassageEmbeddings.open(tmp_path / "ix.embeddings")
    assert {
        k: store.manifest[k] for k in ("model", "max_seq_length", "with_title", "dimension", "count")
    } == {
        "model": "all-MiniLM-L6-v2",
        "max_seq_length": 256,
        "with_title": True,
        "dimension": 384,
        "count": 5,
    }
    assert store.manifest["complete"] and store.vectors.dtype == np.float16
    assert not (tmp_path / "ix.embeddings" / "parts").exists()
    assert (tmp_path / "ix.embeddings" / "docids.txt").read_text().split() == [p.id for p in passages]

    texts = [passage_text(p, with_title=True) for p in passages]
    vectors, found = store.lookup([p.id for p in reversed(passages)], texts[::-1])
    assert found.all()
    np.testing.assert_allclose(vectors, encoder.embed(texts[::-1]), atol=2e-3)

    # An unknown id, and a known id whose text is not the one embedded, are not found.
    _, found = store.lookup(
        ["nobody", "kepler-1", "galileo-1"], ["x", "Kepler's laws. Other text.", texts[1]]
    )
    assert found.tolist() == [False, False, True]


def test_interrupted_build_resumes_after_the_last_complete_chunk(collection, encoder, passages, tmp_path):
    store_dir = tmp_path / "ix.embeddings"
    calls: list[list[str]] = []

    def interrupted(texts: list[str]):
        if calls:
            raise KeyboardInterrupt
        calls.append(texts)
        return encoder.embed(texts)

    with pytest.raises(KeyboardInterrupt):
        build(collection, store_dir, encoder, embed=interrupted, chunk_size=2)
    assert not json.loads((store_dir / "manifest.json").read_text())["complete"]
    assert [p.name for p in (store_dir / "parts").iterdir()] == ["part-000000.npz"]
    with pytest.raises(CastError, match="incomplete"):
        PassageEmbeddings.open(store_dir)

    resumed: list[str] = []

    def counting(texts: list[str]):
        resumed.extend(texts)
        return encoder.embed(texts)

    summary = build(collection, store_dir, encoder, embed=counting, chunk_size=2)
    assert (summary.resumed, summary.embedded, summary.count) == (2, 3, 5)
    assert resumed == [passage_text(p, with_title=True) for p in passages[2:]]
    store = PassageEmbeddings.open(store_dir)
    texts = [passage_text(p, with_title=True) for p in passages]
    vectors, found = store.lookup([p.id for p in passages], texts)
    assert found.all()
    np.testing.assert_allclose(vectors, encoder.embed(texts), atol=2e-3)

    # A finished store is left as it is; other settings must start again with overwrite.
    assert build(collection, store_dir, encoder, chunk_size=2).embedded == 0
    with pytest.raises(CastError, match=r"started with max_seq_length 256 \(now 128\).*--overwrite"):
        build_embeddings(
            collection, store_dir, EmbeddingSettings("all-MiniLM-L6-v2", 128, True), encoder.embed, 384
        )


def test_reranking_with_the_store_scores_as_without_it(collection, encoder, passages, tmp_path):
    index = tmp_path / "ix"
    build(collection, store_path(index), encoder)
    resources = Resources({"device": "cpu", "cache_dir": None, "index": str(index)})
    with_store = build_stage("reranker", {"name": "biencoder"}, resources)
    assert with_store.store is not None
    encoded: list[str] = []
    embed = with_store.encoder.embed
    with_store.encoder.embed = lambda texts, batch_size: encoded.extend(texts) or embed(texts, batch_size)

    changed = Passage("newton-1", "Newton's text as another collection version has it.", "Isaac Newton")
    unknown = Passage("halley-1", "Halley's comet returns every 76 years.", "Halley's Comet")
    head = ranking([*passages, changed, unknown])
    ranked = with_store.rerank(QUERY, head)
    assert encoded == [QUERY, passage_text(changed, True), passage_text(unknown, True)]

    without = encoder.rerank(QUERY, head)
    assert [p.id for p in ranked] == [p.id for p in without]
    assert [p.score for p in ranked] == pytest.approx([p.score for p in without], abs=2e-3)


def test_a_store_built_with_other_settings_is_ignored_or_refused(collection, encoder, tmp_path, caplog):
    index = tmp_path / "ix"
    other = EmbeddingSettings("all-MiniLM-L6-v2", 128, True)
    build_embeddings(collection, store_path(index), other, encoder.embed, 384, progress=False)

    with caplog.at_level(logging.WARNING, logger="cast.index.embeddings"):
        assert store_for_reranker("auto", str(index), encoder.embedding_settings, 384) is None
    assert "max_seq_length 128 (re-ranker: 256)" in caplog.text
    with pytest.raises(ConfigError, match="reranker.embeddings: .*max_seq_length 128"):
        store_for_reranker(str(store_path(index)), str(index), encoder.embedding_settings, 384)
    with pytest.raises(ConfigError, match="no passage-embedding store"):
        store_for_reranker(str(tmp_path / "nowhere"), str(index), encoder.embedding_settings, 384)
    assert store_for_reranker("auto", str(tmp_path / "other"), encoder.embedding_settings, 384) is None
    assert store_for_reranker("none", str(index), other, 384) is None


@pytest.fixture(scope="module")
def index_dir(collection: Path, tmp_path_factory) -> Path:
    index_dir = tmp_path_factory.mktemp("embed-cli") / "ix"
    build_index([collection], index_dir, threads=1, progress=False)
    return index_dir


def test_cli_embeds_beside_the_index_and_explains_bad_arguments(collection, index_dir, tmp_path, capsys):
    index = tmp_path / "ix"
    shutil.copytree(index_dir, index)
    base = ["index", "embed", "--index", str(index), "--input", str(collection)]
    assert cast_main([*base, "--device", "cpu", "--chunk-size", "2"]) == 0
    assert "embedded 5 passages into" in capsys.readouterr().out
    assert PassageEmbeddings.open(store_path(index)).manifest["count"] == 5

    assert cast_main(["index", "embed", "--index", str(tmp_path / "none"), "--input", str(collection)]) == 1
    assert "no index at" in capsys.readouterr().err
    assert (
        cast_main(["index", "embed", "--index", str(index), "--input", str(tmp_path / "missing.jsonl")]) == 1
    )
    assert "missing.jsonl: no such file or directory" in capsys.readouterr().err
    assert cast_main([*base, "--set", "reranker.name=none"]) == 1
    assert "passage embeddings are for the `biencoder` re-ranker" in capsys.readouterr().err
    other = tmp_path / "other.jsonl"
    other.write_text('{"id": "x1", "contents": "Not what the index was built from."}\n')
    assert cast_main(["index", "embed", "--index", str(index), "--input", str(other), "--overwrite"]) == 1
    assert "the inputs hold 1 passages with text (" in capsys.readouterr().err  # index: 5 (its build record)
