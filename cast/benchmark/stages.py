"""The stages a study builds outside a pipeline: from a profile's settings, from specs such as ``hqe`` or
``biencoder:first_stage_weight=0.2``, and run over a benchmark's turns (``bench/retrieval.py``, ``bench/ikat.py``
and ``bench/encoders.py`` compare rewriters and re-rankers with them)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cast.conversation.walker import Step, rewrite_conversations, walk
from cast.core.config import load_config
from cast.core.pipeline import rewrite_turns
from cast.core.records import Conversation, PreparedTurn, Rewrite
from cast.core.registry import build_stage
from cast.formats.topics import load_topics
from cast.infra.resources import Resources


def study_resources(
    profile: str, index: str | Path, overrides: Sequence[str]
) -> tuple[dict[str, Any], Resources]:
    """A profile's config on ``index`` (on the CPU, with ``--set``-style ``overrides``) and the resources its
    stages share."""
    config = load_config(profile, [f"index={index}", "device=cpu", *overrides])
    return config, Resources(config)


def stage_section(config: dict[str, Any], kind: str, spec: str) -> dict[str, Any]:
    """The ``kind`` (rewriter, reranker) section for ``spec``: ``NAME`` or ``NAME:KEY=VALUE,...`` (values read as
    YAML).

    The config's section is the base when it names the same stage (so ``--set rewriter.*`` applies).
    """
    import yaml

    name, _, settings = spec.partition(":")
    section = config.get(kind, {})
    section = dict(section) if section.get("name") == name else {"name": name}
    for assignment in filter(None, settings.split(",")):
        key, _, value = assignment.partition("=")
        section[key.strip()] = yaml.safe_load(value)
    return section


def spec_stage(kind: str, spec: str, config: dict[str, Any], resources: Resources) -> Any:
    """A stage from ``NAME`` or ``NAME:KEY=VALUE,...``, on the config's section when it names the same stage."""
    return build_stage(kind, stage_section(config, kind, spec), resources)


def load_conversations(
    topics: Path, automatic_topics: Path | None = None, rewrites: Path | None = None
) -> list[Conversation]:
    """The conversations of ``topics``, with the automatic rewrites of ``automatic_topics`` (CAsT's topic files
    of automatic rewrites) and the manual ones of ``rewrites`` where given."""
    automatic = None
    if automatic_topics is not None:
        found = {t.qid: t.automatic_rewrite for c in load_topics(automatic_topics) for t in c.turns}
        automatic = {qid: text for qid, text in found.items() if text}
    return load_topics(topics, rewrites=rewrites, automatic_rewrites=automatic)


def rewrite_all(
    rewriter: Any, conversations: Sequence[Conversation], only_last: bool = False
) -> dict[str, Any]:
    """``{qid: Rewrite}`` for every turn (each qid once), rewritten as the pipeline rewrites it: later turns see
    the earlier rewrites (no passages). With ``only_last`` (CANARD), earlier questions stand as they were asked."""
    if not only_last:
        return {p.qid: p.rewrite for p in rewrite_conversations(rewriter, conversations)}

    def rewrite(steps: list[Step]) -> list[PreparedTurn]:
        last = [s for s in steps if s.turn is s.conversation.turns[-1]]
        rewritten = iter(rewrite_turns(rewriter, None, [(s.history, s.turn) for s in last]))
        return [
            next(rewritten) if s in last else PreparedTurn(s.turn, Rewrite(s.turn.utterance, "asked"))
            for s in steps
        ]

    taken = walk(conversations, rewrite, PreparedTurn.past_turn)
    return {p.qid: p.rewrite for p in taken if p.rewrite.method != "asked"}


def rerank_in_chunks(reranker: Any, items: list, chunk: int = 8) -> list:
    """``reranker.rerank_batch`` over a few queries at a time (a progress bar; embeddings are cached as it goes)."""
    from tqdm import tqdm

    heads = []
    for start in tqdm(range(0, len(items), chunk), desc=f"re-rank ({reranker.name})", unit="chunk"):
        heads.extend(reranker.rerank_batch(items[start : start + chunk]))
    return heads
