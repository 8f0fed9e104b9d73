"""The pipeline's stages as PyTerrier transformers (the ``pyterrier`` extra: ``pip install 'cast-toolkit[pyterrier]'``).

Each stage of a :class:`~cast.core.pipeline.Pipeline` becomes a ``pt.Transformer`` over PyTerrier's frames, so that our
stages compose with ``>>`` among PyTerrier's own, and ``pt.Experiment`` evaluates them beside PyTerrier's::

    import pyterrier as pt
    from cast import pyterrier as cpt
    from cast.core.config import load_config
    from cast.core.pipeline import Pipeline

    stages = cpt.transformers(Pipeline.from_config(load_config("offline", ["index=indexes/cast2022-dev"])))
    topics = cpt.topics("irds:trec-cast/v1/2020")              # or a topics file, as `cast run --topics` takes
    answers = (stages.rewriter >> stages.retriever >> stages.reranker >> stages.selector >> stages.answerer)(topics)
    pt.Experiment(
        [stages.rewriter >> stages.retriever, stages.rewriter >> stages.retriever >> stages.reranker],
        topics, cpt.qrels("irds:trec-cast/v1/2020"), ["nDCG@3", "RR"], names=["LMD", "LMD >> bi-encoder"],
    )

Frames and their columns (PyTerrier's, plus the conversation's):

- a topics frame (:func:`topics_frame`): ``qid``, ``query`` (the utterance), and what rewriters read of the
  conversation: ``topic_id``, ``turn_id``, ``utterance``, ``manual_rewrite``, ``automatic_rewrite``, ``response``,
  ``response_ids``, ``ptkb`` (the user's statements, ``(id, text)`` pairs) and ``history``: the qids of the turns
  before it in its conversation, which must be rows of the same frame. A qid is a row once (a CAsT 2022 turn shared
  by several paths: with the history of the first path that reaches it, as ``cast run`` answers it).
- :class:`Rewriter` sets ``query`` to the rewrite (the utterance moves to ``query_0``, as PyTerrier's rewriters
  do), ``question`` (what the answer generator answers) and ``history_query`` (what later turns read of it).
- :class:`Retriever` gives a result frame: ``docno``, ``text``, ``title``, ``score``, ``rank`` (from 0), and the
  first stage's ``first_stage_score`` and ``first_stage_rank``; :class:`Reranker` re-ranks any result frame that
  has ``text`` (a PyTerrier retriever's too): its ``score`` is the run file's (non-increasing, so that evaluation
  keeps the order), ``stage_score`` the stages' own.
- :class:`Selector` keeps the passages chosen for the answer, with ``selection`` (the
  :class:`~cast.core.records.Selection`: scores, explanation, entities); :class:`Answerer` gives a row per query with
  ``qanswer`` (the answer's text, as pyterrier-rag names it), ``answer`` (the :class:`~cast.core.records.Answer`, its
  sentences citing passages) and ``verification``.

The rewriter and the selector walk each conversation turn by turn (:func:`cast.conversation.walker.walk`, as ``cast run``):
a turn's rewrite reads the earlier turns' rewrites, its selection their entities. A PyTerrier pipeline rewrites
every turn before it retrieves, so what needs a later stage's output at an earlier turn is refused, naming why:
``history_responses: answers``, and the ``t5`` rewriter on turns whose earlier turns have no response (it reads
their top passage). Otherwise the rankings and answers are those of ``cast run`` with the same config.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from cast.infra.extras import require_extra

require_extra("pyterrier", "cast.pyterrier")

import pandas as pd  # noqa: E402  (after the check, which names the extra)
import pyterrier as pt  # noqa: E402

from cast.conversation.walker import Step, walk  # noqa: E402
from cast.core.limits import bounded_ranking  # noqa: E402
from cast.core.pipeline import Pipeline, merge_head  # noqa: E402
from cast.core.records import (  # noqa: E402
    Conversation,
    Passage,
    PastTurn,
    PreparedTurn,
    PTKBStatement,
    Rewrite,
    ScoredPassage,
    Selection,
    Turn,
    TurnLinks,
)
from cast.errors import CastError  # noqa: E402
from cast.formats.outputs import run_scores  # noqa: E402
from cast.formats.topics import load_topics, read_qrels  # noqa: E402

# The topics frame's conversation columns, as Turn fields (and the conversation's PTKB, its earlier turns).
TURN_COLUMNS = (
    "topic_id",
    "turn_id",
    "utterance",
    "manual_rewrite",
    "automatic_rewrite",
    "response",
    "response_ids",
)
CONTEXT_COLUMNS = (*TURN_COLUMNS, "ptkb", "history")
RESULT_COLUMNS = ("docno", "text", "title", "score", "rank")


class _PipelineStep(pt.Transformer):
    """A transformer running one step of a pipeline (``kind``: the stage it names; ``verbose``: progress bars
    over turns, for the steps that walk conversations)."""

    kind = ""

    def __init__(self, pipeline: Pipeline, *, verbose: bool = False):
        self.pipeline = pipeline
        self.verbose = verbose

    def __repr__(self) -> str:
        return f"cast.{type(self).__name__}({getattr(self.pipeline, self.kind).name})"


class Stages(NamedTuple):
    """A pipeline's stages as PyTerrier transformers, in the order they compose."""

    rewriter: Rewriter
    retriever: Retriever
    reranker: Reranker
    selector: Selector
    answerer: Answerer


def transformers(pipeline: Pipeline, *, verbose: bool = False) -> Stages:
    """The stages of ``pipeline`` as transformers (``verbose``: progress bars over turns)."""
    return Stages(
        Rewriter(pipeline, verbose=verbose),
        Retriever(pipeline),
        Reranker(pipeline),
        Selector(pipeline, verbose=verbose),
        Answerer(pipeline),
    )


def topics_frame(conversations: Iterable[Conversation]) -> pd.DataFrame:
    """The topics frame of ``conversations``: a row per qid, in conversation order (see the module docstring)."""
    rows: dict[str, dict[str, Any]] = {}
    for conversation in conversations:
        ptkb = tuple((s.id, s.text) for s in conversation.ptkb)
        for position, turn in enumerate(conversation.turns):
            if turn.qid not in rows:
                history = tuple(t.qid for t in conversation.turns[:position])
                fields = {name: getattr(turn, name) for name in TURN_COLUMNS}
                rows[turn.qid] = {
                    "qid": turn.qid,
                    "query": turn.utterance,
                    **fields,
                    "ptkb": ptkb,
                    "history": history,
                }
    return pd.DataFrame(list(rows.values()), columns=["qid", "query", *CONTEXT_COLUMNS])


def topics(source: str | Path, *, rewrites: str | Path | None = None) -> pd.DataFrame:
    """The topics frame of a topics file or ``irds:<id>`` (as ``cast run --topics`` and ``--rewrites`` read them)."""
    return topics_frame(load_topics(source, rewrites=rewrites))


def qrels(source: str | Path) -> pd.DataFrame:
    """PyTerrier's qrels frame (``qid``, ``docno``, ``label``) of a qrels file or ``irds:<id>``."""
    judged = read_qrels(source)
    rows = [(qid, docno, label) for qid, docs in judged.items() for docno, label in docs.items()]
    return pd.DataFrame(rows, columns=["qid", "docno", "label"])


class Rewriter(_PipelineStep):
    """The pipeline's rewriter (and PTKB statement selection), turn by turn over each conversation."""

    kind = "rewriter"

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        pt.validate.query_frame(inp, ["topic_id", "turn_id", "utterance", "history"])
        out = pt.model.push_queries(inp)
        if inp.empty:
            return out.assign(query=[], question=[], history_query=[])
        if self.pipeline.answers_as_responses:
            raise CastError(
                "history_responses: answers rewrites a turn after the earlier turns are answered, but a PyTerrier "
                "pipeline rewrites every turn before it answers any: use history_responses: topics, or cast run"
            )
        turns = _turns(inp)
        self._check_top_passages(inp, turns)

        def rewrite(steps: list[Step]) -> list[PreparedTurn]:
            return self.pipeline.rewrite_batch(
                [(s.history, s.turn) for s in steps], [s.conversation.ptkb for s in steps]
            )

        rewritten = walk(
            _paths(inp, turns),
            rewrite,
            lambda prepared: PastTurn(turn=prepared.turn, query=prepared.rewrite.history_query),
            progress=self.verbose,
            desc="rewriting",
        )
        rewrites = {p.qid: p.rewrite for p in rewritten}
        return out.assign(
            query=[rewrites[qid].query for qid in inp["qid"]],
            question=[rewrites[qid].answer_question for qid in inp["qid"]],
            history_query=[rewrites[qid].history_query for qid in inp["qid"]],
        )

    def _check_top_passages(self, inp: pd.DataFrame, turns: dict[str, Turn]) -> None:
        if not self.pipeline.rewriter.reads_top_passages:
            return
        for qid, history in zip(inp["qid"], inp["history"], strict=True):
            silent = [earlier for earlier in _sequence(history) if not turns[str(earlier)].response]
            if silent:
                raise CastError(
                    f"rewriter {self.pipeline.rewriter.name} reads the top passage of an earlier turn without a "
                    f"response ({silent[0]}, before {qid}), which a PyTerrier pipeline has not retrieved when it "
                    "rewrites: run these topics with cast run"
                )


class Retriever(_PipelineStep):
    """The pipeline's first stage: a query frame in, its result frame out."""

    kind = "first_stage"

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        pt.validate.query_frame(inp)
        rankings = self.pipeline.first_stage.search_batch(list(inp["query"])) if not inp.empty else []
        return _result_frame(inp, [bounded_ranking(ranking, {}) for ranking in rankings])


class Reranker(_PipelineStep):
    """The pipeline's re-ranker over each query's ranking (its head re-scored, the rest below it)."""

    kind = "reranker"

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        pt.validate.result_frame(inp, ["text"])
        queries, rankings = _rankings(inp)
        depth = self.pipeline.reranker.depth
        items = [
            (str(query["query"]), ranking[:depth]) for query, ranking in zip(queries, rankings, strict=True)
        ]
        questions = [_row_rewrite(query).answer_question for query in queries]
        heads = self.pipeline.reranker.rerank_batch(items, questions=questions) if items else []
        merged = [merge_head(head, ranking) for head, ranking in zip(heads, rankings, strict=True)]
        return _result_frame(pd.DataFrame(queries, columns=_query_columns(inp)), merged)


class Selector(_PipelineStep):
    """The pipeline's linker and passage selector: the passages each turn's answer is written from, chosen among
    the first candidates of its ranking with the entities of the conversation so far."""

    kind = "selector"

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        pt.validate.result_frame(inp, ["text", "topic_id", "turn_id", "utterance", "history"])
        queries, rankings = _rankings(inp)
        frame = pd.DataFrame(queries, columns=_query_columns(inp))
        if frame.empty:
            return _result_frame(frame, []).assign(selection=[])
        turns = _turns(frame)
        by_qid = {str(q["qid"]): (q, tuple(r)) for q, r in zip(queries, rankings, strict=True)}

        def prepared(turn: Turn) -> PreparedTurn:
            query, ranking = by_qid[turn.qid]
            return PreparedTurn(turn=turn, rewrite=_row_rewrite(query), ranking=ranking)

        def select(steps: list[Step]) -> list[tuple[Turn, TurnLinks, Selection]]:
            selected = self.pipeline.select_batch([(s.history, prepared(s.turn)) for s in steps])
            return [(s.turn, links, selection) for s, (links, selection) in zip(steps, selected, strict=True)]

        def past_turn(selected: tuple[Turn, TurnLinks, Selection]) -> PastTurn:
            turn, links, selection = selected
            query, ranking = by_qid[turn.qid]
            history_query = query.get("history_query")
            return PastTurn(
                turn=turn,
                query=str(query["query"] if _missing(history_query) else history_query),
                top_passage=ranking[0].passage if ranking else None,
                query_entities=links.query_entities,
                focus_entity=selection.focus_entity,
            )

        walked = walk(_paths(frame, turns), select, past_turn, progress=self.verbose, desc="selecting")
        chosen = {turn.qid: selection for turn, _, selection in walked}
        out = _result_frame(frame, [list(chosen[str(qid)].passages) for qid in frame["qid"]])
        return out.assign(selection=[chosen[str(qid)] for qid in out["qid"]])


class Answerer(_PipelineStep):
    """The pipeline's answer generator (and verifier): a row per query with its answer, written from the passages a
    :class:`Selector` chose (its ``selection``), or else from all the frame's passages of the query, best first (cut
    a ranking with PyTerrier's ``% k``)."""

    kind = "summarizer"

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        pt.validate.result_frame(inp, ["text"])
        queries, rankings = _rankings(inp)
        items = [
            (
                _row_rewrite(query).answer_question,
                query["selection"]
                if isinstance(query.get("selection"), Selection)
                else Selection(passages=tuple(ranking), method="ranking"),
            )
            for query, ranking in zip(queries, rankings, strict=True)
        ]
        answered = self.pipeline.write_answers(items) if items else []
        out = pd.DataFrame(queries, columns=_query_columns(inp))
        return out.assign(
            qanswer=[answer.text for answer, _ in answered],
            answer=[answer for answer, _ in answered],
            verification=[verification for _, verification in answered],
        )


def _turns(frame: pd.DataFrame) -> dict[str, Turn]:
    """Each row's turn, by qid, from the frame's conversation columns."""
    turns = {}
    for row in frame.to_dict("records"):
        text = {name: None if _missing(row.get(name)) else str(row[name]) for name in TURN_COLUMNS}
        turns[str(row["qid"])] = Turn(
            qid=str(row["qid"]),
            topic_id=str(text["topic_id"]),
            turn_id=str(text["turn_id"]),
            utterance=str(text["utterance"]),
            manual_rewrite=text["manual_rewrite"],
            automatic_rewrite=text["automatic_rewrite"],
            response=text["response"],
            response_ids=tuple(_sequence(row.get("response_ids"))),
        )
    return turns


def _paths(frame: pd.DataFrame, turns: dict[str, Turn]) -> list[Conversation]:
    """Each row's conversation up to it (its ``history``, then itself), for :func:`cast.conversation.walker.walk`."""
    paths = []
    for row in frame.to_dict("records"):
        history = [str(qid) for qid in _sequence(row["history"])]
        missing = [qid for qid in history if qid not in turns]
        if missing:
            raise CastError(
                f"turn {row['qid']}'s earlier turn {missing[0]} is not in the frame: give the frame every turn of "
                "its conversations (a selector's frame: each earlier turn needs a ranking)"
            )
        ptkb = tuple(PTKBStatement(str(i), str(text)) for i, text in _sequence(row.get("ptkb")))
        chain = tuple(turns[qid] for qid in history) + (turns[str(row["qid"])],)
        paths.append(Conversation(str(row["topic_id"]), chain, ptkb=ptkb))
    return paths


def _rankings(inp: pd.DataFrame) -> tuple[list[dict[str, Any]], list[list[ScoredPassage]]]:
    """Each query's columns (in the frame's order) and its passages, best first (by rank, else by score)."""
    if inp.empty:
        return [], []
    frame = inp if "rank" in inp else pt.model.add_ranks(inp)
    queries, rankings = [], []
    for _, group in frame.groupby("qid", sort=False):
        group = group.sort_values("rank", kind="stable")
        queries.append(group.iloc[0].to_dict())
        rankings.append([_scored(row) for row in group.to_dict("records")])
    return queries, rankings


def _scored(row: dict[str, Any]) -> ScoredPassage:
    """A result row's passage; a PyTerrier retriever's (no first-stage columns) is its own first stage."""
    score = float(_cell(row, "stage_score", row["score"]))
    title = _cell(row, "title", None)
    return ScoredPassage(
        Passage(str(row["docno"]), str(row["text"]), None if title is None else str(title)),
        score,
        first_stage_score=float(_cell(row, "first_stage_score", score)),
        first_stage_rank=int(_cell(row, "first_stage_rank", int(row["rank"]) + 1)),
    )


def _query_columns(frame: pd.DataFrame) -> list[str]:
    """The columns of ``frame`` that belong to the query: PyTerrier's (``qid``, ``query``, ``query_0``...: names
    starting with q) and the conversation's; the others belong to a passage."""
    query_level = {*pt.model.query_columns(frame), *CONTEXT_COLUMNS, "history_query"}
    return [c for c in frame.columns if c in query_level]


def _result_frame(queries: pd.DataFrame, rankings: Sequence[Sequence[ScoredPassage]]) -> pd.DataFrame:
    """The result frame of each query's ranking: the query's columns, then the passages' (see the module)."""
    columns = _query_columns(queries)
    extra = ["stage_score", "first_stage_score", "first_stage_rank"]
    rows = []
    for query, ranking in zip(queries[columns].to_dict("records"), rankings, strict=True):
        for rank, (passage, score) in enumerate(zip(ranking, run_scores(ranking), strict=True)):
            rows.append(
                {
                    **query,
                    "docno": passage.id,
                    "text": passage.passage.text,
                    "title": passage.passage.title,
                    "score": score,
                    "rank": rank,
                    "stage_score": passage.score,
                    "first_stage_score": passage.first_stage_score,
                    "first_stage_rank": passage.first_stage_rank,
                }
            )
    return pd.DataFrame(rows, columns=[*columns, *RESULT_COLUMNS, *extra])


def _cell(row: dict[str, Any], name: str, default: Any) -> Any:
    """A row's value, or ``default`` where it has none (the column is absent, or the cell empty)."""
    value = row.get(name)
    return default if _missing(value) else value


def _sequence(value: Any) -> Sequence[Any]:
    """A cell holding a list or tuple, or nothing (``None``, ``NaN``): ``()``."""
    return () if _missing(value) else value


def _row_rewrite(query: Any) -> Rewrite:
    """The rewrite a query row carries: its ``query``, and its ``question`` where it has one."""
    question = None if _missing(query.get("question")) else str(query["question"])
    return Rewrite(query=str(query["query"]), method="pyterrier", question=question)


def _missing(value: Any) -> bool:
    """A cell without a value (``None``, or the ``NaN`` pandas fills in)."""
    return value is None or (isinstance(value, float) and value != value)
