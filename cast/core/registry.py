"""Stage names used in configs, mapped to the classes that implement them, and the resources they are built with.

Classes are named as ``"module:Class"`` strings and imported only when a config asks for them, so that
choosing the BM25 first stage never imports torch (and ``cast --help`` imports nothing heavy), and so that the
turn core names the layers above it (the stages, what starts the JVM and the models) without importing them.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from cast.core.stages import Stage, StageResources
from cast.errors import ConfigError

STAGES: dict[str, dict[str, str]] = {
    "rewriter": {
        "raw": "cast.rewrite.baselines:RawRewriter",
        "manual": "cast.rewrite.baselines:ManualRewriter",
        "automatic": "cast.rewrite.baselines:AutomaticRewriter",
        "hqe": "cast.rewrite.hqe:HQERewriter",
        "term_selection": "cast.rewrite.terms:TermSelectionRewriter",
        "t5": "cast.rewrite.t5:T5Rewriter",
        "llm": "cast.rewrite.llm:LLMRewriter",
    },
    "ptkb": {
        "none": "cast.rewrite.ptkb:NoPTKB",
        "all": "cast.rewrite.ptkb:AllPTKB",
        "bm25": "cast.rewrite.ptkb:BM25PTKB",
        "biencoder": "cast.rewrite.ptkb:BiEncoderPTKB",
        "cross_encoder": "cast.rewrite.ptkb:CrossEncoderPTKB",
    },
    "first_stage": {
        "lmd": "cast.rank.first_stage:LMDFirstStage",
        "bm25": "cast.rank.first_stage:BM25FirstStage",
    },
    "reranker": {
        "none": "cast.rank.rerank:NoReranker",
        "monobert": "cast.rank.rerank:MonoBERTReranker",
        "biencoder": "cast.rank.rerank:BiEncoderReranker",
        "cross_encoder": "cast.rank.rerank:CrossEncoderReranker",
    },
    "linker": {
        "none": "cast.entity.link.linkers:NoLinker",
        "dictionary": "cast.entity.link.dictionary:DictionaryLinker",
        "wikipedia": "cast.entity.link.wikipedia:WikipediaLinker",
        "spotlight": "cast.entity.link.spotlight:SpotlightLinker",
        "fox": "cast.entity.link.fox:FoxLinker",
    },
    "knowledge_base": {
        "collection": "cast.entity.relatedness:CollectionKnowledgeBase",
        "link_graph": "cast.entity.relatedness:LinkGraphKnowledgeBase",
        "sparql": "cast.entity.relatedness:SparqlKnowledgeBase",
    },
    "selector": {
        "o": "cast.entity.select.selection:OriginalOrderSelector",
        "er": "cast.entity.select.selection:EntityRelatednessSelector",
        "eg": "cast.entity.select.selection:EntityGraphSelector",
    },
    "summarizer": {
        "topk_trim": "cast.summarize.extractive:TopKTrimSummarizer",
        "entity_extractive": "cast.summarize.entity_extractive:EntityExtractiveSummarizer",
        "learnt_extractive": "cast.summarize.learnt_extractive:LearntExtractiveSummarizer",
        "seq2seq": "cast.summarize.seq2seq:Seq2SeqSummarizer",
        "llm": "cast.summarize.llm:LLMSummarizer",
    },
    "verifier": {
        "none": "cast.summarize.verify:NoVerifier",
        "claims": "cast.summarize.verify:ClaimVerifier",
    },
}

# What a pipeline built from a config alone starts its resources with (:func:`resources_for`).
RESOURCES = "cast.infra.resources:Resources"


def named_class(path: str) -> Any:
    """The class a ``"module:Class"`` string names (its module imported now)."""
    module_name, class_name = path.split(":")
    return getattr(importlib.import_module(module_name), class_name)


def stage_class(kind: str, name: str) -> type[Stage]:
    """The class registered as ``name`` for ``kind`` (imported on demand)."""
    if kind not in STAGES:
        raise ConfigError(f"unknown stage kind {kind!r}; known kinds: {', '.join(STAGES)}")
    names = STAGES[kind]
    if name not in names:
        raise ConfigError(f"unknown {kind} {name!r}; choose one of: {', '.join(sorted(names))}")
    return named_class(names[name])


def resources_for(config: dict[str, Any]) -> StageResources:
    """New resources for ``config`` (:data:`RESOURCES`: nothing starts until a stage asks for it)."""
    return named_class(RESOURCES)(config)


def without_runtime_settings(description: Mapping[str, Any]) -> dict[str, Any]:
    """A pipeline's description (``Pipeline.describe()``) less its stages' :class:`~cast.core.settings.Runtime`
    settings (batch sizes, threads, retries): what decides whether two runs' outputs may be mixed."""
    kept: dict[str, Any] = {}
    for kind, section in description.items():
        if kind in STAGES and isinstance(section, Mapping) and section.get("name") in STAGES[kind]:
            try:
                settings = stage_class(kind, section["name"]).settings()
            except ImportError:  # a stage this machine cannot load: compare all it recorded
                settings = {}
            section = {k: v for k, v in section.items() if not (k in settings and settings[k].runtime)}
        kept[kind] = section
    return kept


def build_stage(kind: str, section: dict[str, Any], resources: StageResources) -> Stage:
    """Build a stage from its config section (``{"name": ..., **settings}``)."""
    cls, params = _section(kind, section)
    return cls.from_config(params, resources)


def shared_stage(kind: str, resources: StageResources) -> Any:
    """The stage configured under ``kind`` in ``resources``' config, built once and shared (a knowledge base that
    several selectors read, say).

    Raises:
        ConfigError: the config has no such section.
    """
    if kind not in resources.config:
        raise ConfigError(f"the config has no {kind!r} section, which this pipeline needs")
    return resources.shared(("stage", kind), lambda: build_stage(kind, resources.config[kind], resources))


def check_section(kind: str, section: Any) -> None:
    """Check a config section's stage name and settings without building it (for sections a pipeline may not
    build, e.g. the knowledge base under the ``o`` or ``eg`` selector: a typo there must not pass unseen)."""
    try:
        cls, params = _section(kind, section)
    except ImportError:  # a registered stage whose module cannot load here: building it, if ever, says why
        return
    cls.check_params(params)


def _section(kind: str, section: Any) -> tuple[type[Stage], dict[str, Any]]:
    if not isinstance(section, dict) or "name" not in section:
        raise ConfigError(f"config section {kind!r} must be a mapping with a 'name' key, got {section!r}")
    params = {k: v for k, v in section.items() if k != "name"}
    return stage_class(kind, section["name"]), params
