"""The pipeline's stages as PyTerrier transformers (the ``pyterrier`` extra: ``pip install 'cast-toolkit[pyterrier]'``).

Each stage is built alone, by its registry name, with its declared settings as keywords (``cast stages`` lists
them; an unknown or out-of-range one stops with the allowed ones), and composes with ``>>`` among PyTerrier's own
transformers; ``pt.Experiment`` evaluates them beside PyTerrier's::

    import pyterrier as pt
    from cast import pyterrier as cpt

    index = "indexes/cast2022-dev"
    ranking = cpt.Rewriter("term_selection") >> cpt.Retriever(index=index, mu=1000) % 100
    reranked = ranking >> cpt.ReRanker("biencoder", index=index, first_stage_weight=0.2)
    answering = reranked >> cpt.Answerer("entity_extractive", words=70)
    answering.search("How long do they live?", history=["What are the largest turtles?"])
    topics = cpt.topics("irds:trec-cast/v1/2020")           # or a topics file, as `cast run --topics` takes
    pt.Experiment([ranking, reranked], topics, cpt.qrels("irds:trec-cast/v1/2020"), ["nDCG@3", "RR"], batch_size=8)

Every constructor also takes ``index``, ``cache_dir`` (the cache of expensive calls; none: in memory), ``device``,
``stemmer``, ``encoder`` and ``knowledge_base`` (:data:`SHARED_SETTINGS`, the config's top-level keys); stages built
with the same values share what they load (the Lucene searcher, a sentence encoder, the cache, the knowledge base). A config's
pipeline gives the same transformers: :func:`transformers` (``Pipeline.from_config(load_config(...))``).

Frames and their columns (PyTerrier's, plus the conversation's):

- a topics frame: ``qid``, ``query`` (the utterance) and, where known, ``history``: the earlier turns of its
  conversation, each an utterance, an ``(utterance, response)`` pair or a mapping of :class:`~cast.core.records.Turn`
  fields (``utterance``, ``response``, ``manual_rewrite``, ``qid``...). A row carries its whole history, so that
  ``pt.Experiment(..., batch_size=...)`` may split a conversation. :func:`topics_frame` also gives the turn's own
  fields (``topic_id``, ``turn_id``, ``utterance``, ``manual_rewrite``, ``automatic_rewrite``, ``response``,
  ``response_ids``) and ``ptkb`` (the user's statements, ``(id, text)`` pairs). A qid is a row once (a CAsT 2022
  turn shared by several paths: with the history of the first path that reaches it, as ``cast run`` answers it).
- :class:`Rewriter` sets ``query`` to the rewrite (the utterance moves to ``query_0``, as PyTerrier's rewriters
  do), ``question`` (what the answer generator answers), ``history_query`` (what later turns read of it) and
  ``ptkb_selection`` (the :class:`~cast.core.records.PTKBSelection` its ``ptkb`` selector chose; ``None`` without
  one), which the later stages carry to the answerer's frame (the iKAT 2025 file's PTKB provenance).
- :class:`Retriever` gives a result frame: ``docno``, ``text``, ``title``, ``score`` (the model's: LMD's or BM25's),
  ``rank`` (from 0, by score), and ``first_stage_score`` and ``first_stage_rank``; :class:`ReRanker` re-scores the
  first ``depth`` passages of any result frame with ``text`` (a PyTerrier retriever's too): ``score`` is the
  model's, ``rank`` from it. Cut the first stage at the depth (``% 100``), as for PyTerrier's re-rankers: the
  passages below it are left out (``cast run``'s run file keeps them below the head, with rank-based scores).
- :class:`Selector` keeps the passages chosen for the answer, in the selector's order (``rank``), with its score
  (``score``) and ``selection`` (the :class:`~cast.core.records.Selection`: scores, explanation, entities);
  :class:`Answerer` gives a row per query with ``qanswer`` (the answer's text, as pyterrier-rag names it),
  ``answer`` (the :class:`~cast.core.records.Answer`, its sentences citing passages), ``selection`` and
  ``verification`` (:class:`Verifier`'s, where one checked it). :func:`cast.formats.answer_frames.write_answer_file`
  writes that frame as a TREC RAG 2024 or iKAT 2025 file.

The rewriter walks each row's conversation turn by turn (:func:`cast.conversation.walker.walk`, as ``cast run``):
a turn's rewrite reads the earlier turns' rewrites, each earlier turn rewritten once per call. The selector reads
the entities of the earlier turns' rankings, so its frame holds every earlier turn of a conversation (no
``batch_size`` in ``pt.Experiment``). A PyTerrier pipeline rewrites every turn before it retrieves, so what needs a
later stage's output at an earlier turn is refused, naming why: ``history_responses="answers"``, and the ``t5``
rewriter on turns whose earlier turns have no response (it reads their top passage). Otherwise the rankings and
answers are those of ``cast run`` with the same settings.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from cast.infra.extras import require_extra

require_extra("pyterrier", "cast.pyterrier")

import pandas as pd  # noqa: E402  (after the check, which names the extra)
import pyterrier as pt  # noqa: E402
from pyterrier._ops import Compose  # noqa: E402

from cast.conversation.walker import Step, walk  # noqa: E402
from cast.core import stages as kinds  # noqa: E402
from cast.core.config_keys import ConfigKeys  # noqa: E402
from cast.core.limits import bounded_ranking  # noqa: E402
from cast.core.pipeline import (  # noqa: E402
    COMPOSITION,
    Pipeline,
    answer_selections,
    merge_head,
    rewrite_turns,
    select_turns,
    step_timer,
)
from cast.core.records import (  # noqa: E402
    Answer,
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
    Verification,
)
from cast.core.registry import build_stage  # noqa: E402
from cast.errors import CastError, ConfigError  # noqa: E402
from cast.formats.topics import load_topics, read_qrels  # noqa: E402
from cast.infra.resources import Resources  # noqa: E402

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
RESULT_COLUMNS = ("docno", "text", "title", "score", "rank", "first_stage_score", "first_stage_rank")
# The knowledge base the selectors that read relatedness share, unless told another (the offline profile's).
DEFAULT_KNOWLEDGE_BASE = {"name": "collection"}

_SHARED_RESOURCES: dict[str, Resources] = {}


def resources(
    *,
    index: str | Path | None = None,
    cache_dir: str | Path | None = None,
    device: str = "auto",
    stemmer: str | None = None,
    encoder: Mapping[str, Any] | None = None,
    knowledge_base: Mapping[str, Any] | None = None,
) -> Resources:
    """What stages built with these top-level settings share (one :class:`~cast.infra.resources.Resources` per
    distinct set): the index's searcher, sentence encoders, the cache (``cache_dir``; ``None``: in memory), the
    chat clients and the knowledge base (a config section, ``{"name": "collection"}`` by default).

    Raises:
        ConfigError: a setting that does not fit its declaration (:class:`~cast.core.config_keys.ConfigKeys`), a
            device this machine lacks, or a stemmer that is not the index's.
    """
    config: dict[str, Any] = {
        "index": None if index is None else str(index),
        "cache_dir": None if cache_dir is None else str(cache_dir),
        "device": device,
        "encoder": None if encoder is None else dict(encoder),
        "knowledge_base": dict(knowledge_base or DEFAULT_KNOWLEDGE_BASE),
    }
    if stemmer is not None:
        config["stemmer"] = stemmer
    key = json.dumps(config, sort_keys=True, default=str)
    if key not in _SHARED_RESOURCES:
        ConfigKeys.of_config(config)
        shared = Resources(config)
        shared.check()
        shared.check_device()
        _SHARED_RESOURCES[key] = shared
    return _SHARED_RESOURCES[key]


# The keywords every constructor takes besides its stage's settings: what the stages built with the same values
# share (:func:`resources`).
SHARED_SETTINGS = ("index", "cache_dir", "device", "stemmer", "encoder", "knowledge_base")


def _shared(settings: Mapping[str, Any]) -> tuple[Resources, dict[str, Any]]:
    """The resources that ``settings``' :data:`SHARED_SETTINGS` name, and the stage's own settings."""
    shared = resources(**{key: settings[key] for key in SHARED_SETTINGS if key in settings})
    return shared, {key: value for key, value in settings.items() if key not in SHARED_SETTINGS}


class _Searchable(pt.Transformer):
    """``.search(text, history=[...])``, and ``>>`` giving a pipeline that has it too."""

    def search(
        self, query: str, qid: str = "1", sort: bool = True, *, history: Sequence[Any] = ()
    ) -> pd.DataFrame:
        """The output for one query, given the conversation before it (``history``: earlier utterances,
        ``(utterance, response)`` pairs or mappings of turn fields, oldest first)."""
        out = self.transform(pd.DataFrame([{"qid": qid, "query": query, "history": tuple(history)}]))
        if sort and "rank" in out.columns:
            out = out.sort_values(["qid", "rank"], ascending=[True, True])
        return out

    def __rshift__(self, right: Any) -> ConversationPipeline:
        return ConversationPipeline(self, right)

    def __rrshift__(self, left: Any) -> ConversationPipeline:
        return ConversationPipeline(left, self)


class ConversationPipeline(_Searchable, Compose):
    """PyTerrier's ``>>`` of transformers whose ``.search`` takes the conversation's ``history``; a slice of it is
    a pipeline too (``answering[:3]``: its first three steps, e.g. the ranking that ``pt.Experiment`` measures)."""

    def __getitem__(self, number: Any) -> Any:
        if isinstance(number, slice):
            return ConversationPipeline(*self._transformers[number])
        return self._transformers[number]


class _Step(_Searchable):
    """One stage of kind :attr:`kind` as a transformer: ``name`` (a registry name, a config section or a stage
    built before) built with ``settings``, its own and the :data:`SHARED_SETTINGS`."""

    kind: ClassVar[str]
    # The slots whose stages it runs beside its own, each given by its kind's keyword (the rewriter's ``ptkb``).
    carries: ClassVar[tuple[str, ...]] = ()
    stage: kinds.Stage

    def __init__(self, name: str | kinds.Stage | Mapping[str, Any], **settings: Any):
        self.shared, own = _shared(settings)
        self.stage = _stage(self.kind, name, own, self.shared)

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in dict(self.stage.setting_values).items())
        return f"cast.{type(self).__name__}({self.stage.name!r}{', ' if settings else ''}{settings})"


def _stage(
    kind: str, name: str | kinds.Stage | Mapping[str, Any], settings: Mapping[str, Any], shared: Resources
) -> Any:
    """A stage: ``name`` built with ``settings`` (checked against its declaration; once for the same section and
    resources), a config section, or a stage built before (then with no settings)."""
    if isinstance(name, kinds.Stage):
        if settings:
            raise ConfigError(
                f"{kind} {name.name} is built: give its settings when building it, not "
                f"{', '.join(sorted(settings))}"
            )
        return name
    section = {**name, **settings} if isinstance(name, Mapping) else {"name": name, **settings}
    # Built once per section: a stage named again (in another pipeline of an experiment) is the same one.
    key = ("stage", kind, json.dumps(section, sort_keys=True, default=str))
    return shared.shared(key, lambda: build_stage(kind, section, shared))


class Rewriter(_Step):
    """The rewriter ``name`` (``raw``, ``manual``, ``hqe``, ``term_selection``, ``t5``, ``llm``...) with its
    settings, and the PTKB selector ``ptkb`` (iKAT topics: a name or a config section), turn by turn over each
    row's conversation.

    Args:
        history_responses: ``answers`` is refused: a PyTerrier pipeline rewrites every turn before it answers any.
        settings: the rewriter's, and what the stages share (:data:`SHARED_SETTINGS`).
    """

    kind = "rewriter"
    carries = ("ptkb",)
    stage: kinds.Rewriter

    def __init__(
        self,
        name: str | kinds.Rewriter | Mapping[str, Any],
        *,
        ptkb: str | kinds.PTKBSelector | Mapping[str, Any] | None = None,
        history_responses: str = "topics",
        verbose: bool = False,
        **settings: Any,
    ):
        ConfigKeys.check("history_responses", history_responses)
        super().__init__(name, **settings)
        selector = None if ptkb is None else _stage("ptkb", ptkb, {}, self.shared)
        self.ptkb: kinds.PTKBSelector | None = selector if selector is not None and selector.selects else None
        self.answers_as_responses = history_responses == "answers"
        self.verbose = verbose

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        pt.validate.query_frame(inp, ["query"])
        out = pt.model.push_queries(inp)
        if inp.empty:
            return out.assign(query=[], question=[], history_query=[], ptkb_selection=[])
        if self.answers_as_responses:
            raise CastError(
                "history_responses: answers rewrites a turn after the earlier turns are answered, but a PyTerrier "
                "pipeline rewrites every turn before it answers any: use history_responses: topics, or cast run"
            )
        paths = _conversations(inp)
        self._check_top_passages(paths)

        def rewrite(steps: list[Step]) -> list[PreparedTurn]:
            return rewrite_turns(
                self.stage,
                self.ptkb,
                [(s.history, s.turn) for s in steps],
                [s.conversation.ptkb for s in steps],
            )

        rewritten = walk(
            paths,
            rewrite,
            lambda prepared: PastTurn(turn=prepared.turn, query=prepared.rewrite.history_query),
            progress=self.verbose,
            desc="rewriting",
        )
        prepared = {p.qid: p for p in rewritten}
        return out.assign(
            query=[prepared[qid].rewrite.query for qid in inp["qid"]],
            question=[prepared[qid].rewrite.answer_question for qid in inp["qid"]],
            history_query=[prepared[qid].rewrite.history_query for qid in inp["qid"]],
            ptkb_selection=[prepared[qid].ptkb for qid in inp["qid"]],
        )

    def _check_top_passages(self, paths: Sequence[Conversation]) -> None:
        if not self.stage.reads_top_passages:
            return
        for path in paths:
            silent = [earlier.qid for earlier in path.turns[:-1] if not earlier.response]
            if silent:
                raise CastError(
                    f"rewriter {self.stage.name} reads the top passage of an earlier turn without a response "
                    f"({silent[0]}, before {path.turns[-1].qid}), which a PyTerrier pipeline has not retrieved "
                    "when it rewrites: give the earlier turns' responses, or run these topics with cast run"
                )


class Retriever(_Step):
    """The first stage ``name`` (``lmd``, ``bm25``) over ``index``, with its settings (``mu``, ``k``...): a query
    frame in, its result frame out, with the model's ``score``."""

    kind = "first_stage"
    stage: kinds.FirstStage

    def __init__(
        self,
        name: str | kinds.FirstStage | Mapping[str, Any] = "lmd",
        **settings: Any,
    ):
        super().__init__(name, **settings)

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        pt.validate.query_frame(inp, ["query"])
        rankings = self.stage.search_batch(list(inp["query"])) if not inp.empty else []
        return _result_frame(inp, [bounded_ranking(ranking, {}) for ranking in rankings])


class ReRanker(_Step):
    """The re-ranker ``name`` (``biencoder``, ``cross_encoder``, ``monobert``, ``none``) with its settings: the
    first ``depth`` passages of each query's ranking re-scored, the model's score in ``score``."""

    kind = "reranker"
    stage: kinds.Reranker

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        pt.validate.result_frame(inp, ["text"])
        queries, rankings = _rankings(inp)
        heads = [ranking[: self.stage.depth] for ranking in rankings]
        items = [(str(query["query"]), head) for query, head in zip(queries, heads, strict=True)]
        questions = [_row_rewrite(query).answer_question for query in queries]
        reranked = self.stage.rerank_batch(items, questions=questions) if items else []
        # A re-ranker that scores nothing (``none``) keeps the ranking as it came.
        merged = [merge_head(new, head) for new, head in zip(reranked, heads, strict=True)]
        return _result_frame(pd.DataFrame(queries, columns=_query_columns(inp)), merged)


class Selector(_Step):
    """The passage selector ``name`` (``o``, ``er``, ``eg``) with its settings, and the entity linker ``linker``
    (a name, a config section, or ``None`` for selectors that read no entities): the passages each turn's answer is
    written from, chosen among the first candidates of its ranking with the entities of the conversation so far.
    Its frame holds every earlier turn of each conversation, with its ranking."""

    kind = "selector"
    carries = ("linker",)
    stage: kinds.PassageSelector

    def __init__(
        self,
        name: str | kinds.PassageSelector | Mapping[str, Any],
        *,
        linker: str | kinds.EntityLinker | Mapping[str, Any] | None = None,
        verbose: bool = False,
        **settings: Any,
    ):
        super().__init__(name, **settings)
        if linker is None and self.stage.needs_entities:
            raise ConfigError(
                f"selector {self.stage.name} reads entities: give linker= (dictionary, wikipedia, spotlight...)"
            )
        self.linker: kinds.EntityLinker = _stage("linker", linker or "none", {}, self.shared)
        if self.stage.needs_entities:
            # Its helpers load while the earlier stages run, not when the first turn's passages wait for them.
            self.linker.start_helpers()
        self.verbose = verbose

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        pt.validate.result_frame(inp, ["text"])
        queries, rankings = _rankings(inp)
        frame = pd.DataFrame(queries, columns=_query_columns(inp))
        if frame.empty:
            return _result_frame(frame, []).assign(selection=[])
        paths = _conversations(frame)
        by_qid = {str(q["qid"]): (q, tuple(r)) for q, r in zip(queries, rankings, strict=True)}
        for path in paths:
            missing = [earlier.qid for earlier in path.turns[:-1] if earlier.qid not in by_qid]
            if missing:
                raise CastError(
                    f"turn {path.turns[-1].qid}'s earlier turn {missing[0]} is not in the frame: a selector reads "
                    "each earlier turn's ranking, so give it every turn of the conversations (in pt.Experiment: "
                    "no batch_size)"
                )

        def prepared(turn: Turn) -> PreparedTurn:
            query, ranking = by_qid[turn.qid]
            return PreparedTurn(turn=turn, rewrite=_row_rewrite(query), ranking=ranking)

        def select(steps: list[Step]) -> list[tuple[Turn, TurnLinks, Selection]]:
            selected = select_turns(
                self.linker,
                self.stage,
                [(s.history, prepared(s.turn)) for s in steps],
                step_timer({}, len(steps)),
            )
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

        walked = walk(paths, select, past_turn, progress=self.verbose, desc="selecting")
        chosen = {turn.qid: selection for turn, _, selection in walked}
        selections = [chosen[str(qid)] for qid in frame["qid"]]
        out = _result_frame(
            frame,
            [
                [
                    ScoredPassage(
                        p.passage,
                        selection.scores.get(p.id, p.score),
                        p.first_stage_score,
                        p.first_stage_rank,
                    )
                    for p in selection.passages
                ]
                for selection in selections
            ],
            rank_by_score=False,
        )
        return out.assign(selection=[chosen[str(qid)] for qid in out["qid"]])


class Answerer(_Step):
    """The answer generator ``name`` (``topk_trim``, ``entity_extractive``, ``seq2seq``, ``llm``...) with its
    settings, and the verifier ``verifier`` (a name or a config section; ``None``: answers unchecked): a row per
    query with its answer, written from the passages a :class:`Selector` chose (its ``selection``), or else from
    all the frame's passages of the query, best first (cut a ranking with PyTerrier's ``% k``)."""

    kind = "summarizer"
    carries = ("verifier",)
    stage: kinds.Summarizer

    def __init__(
        self,
        name: str | kinds.Summarizer | Mapping[str, Any],
        *,
        verifier: str | kinds.Verifier | Mapping[str, Any] | None = None,
        **settings: Any,
    ):
        super().__init__(name, **settings)
        self.verifier: kinds.Verifier | None = (
            None if verifier is None else _stage("verifier", verifier, {}, self.shared)
        )

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
        answered = answer_selections(self.stage, self.verifier, items, step_timer({}, max(len(items), 1)))
        out = pd.DataFrame(queries, columns=_query_columns(inp))
        return _with_answers(out, [answer for answer, _ in answered], [v for _, v in answered]).assign(
            selection=[selection for _, selection in items]
        )


class Verifier(_Step):
    """The verifier ``name`` (``claims``, ``none``) with its settings, over an :class:`Answerer`'s frame: each
    answer's unsupported claims dropped (or the answer withheld), ``verification`` saying how it was checked."""

    kind = "verifier"
    stage: kinds.Verifier

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        pt.validate.query_frame(inp, ["answer", "selection"])
        rows = inp.to_dict("records")
        checked = self.stage.verify_batch(
            [(_row_rewrite(row).answer_question, row["selection"], row["answer"]) for row in rows]
        )
        return _with_answers(inp, [answer for answer, _ in checked], [v for _, v in checked])


# A transformer for each slot of the pipeline's composition that no other transformer carries, in its order.
_CARRIED = {kind for step in _Step.__subclasses__() for kind in step.carries}
STEPS: tuple[type[_Step], ...] = tuple(
    step
    for slot in COMPOSITION
    for step in _Step.__subclasses__()
    if step.kind == slot.kind and slot.kind not in _CARRIED
)


class Stages(NamedTuple):
    """A pipeline's stages as PyTerrier transformers, in the order they compose (:data:`STEPS`; the answerer
    checks its answers with the pipeline's verifier, if any)."""

    rewriter: Rewriter
    retriever: Retriever
    reranker: ReRanker
    selector: Selector
    answerer: Answerer


def transformers(pipeline: Pipeline, *, verbose: bool = False) -> Stages:
    """The stages of ``pipeline`` (a config's: ``Pipeline.from_config``) as transformers, sharing its stages
    (``verbose``: progress bars over turns)."""
    # What a transformer takes besides the pipeline's stages: the walks over turns, and the response rule.
    options: dict[type[_Step], dict[str, Any]] = {
        Rewriter: {
            "history_responses": "answers" if pipeline.answers_as_responses else "topics",
            "verbose": verbose,
        },
        Selector: {"verbose": verbose},
    }
    # A step's own slot is one every pipeline fills.
    filled = {kind: stage for kind, stage in pipeline.stages.items() if stage is not None}
    steps = (
        step(
            filled[step.kind],
            **{k: pipeline.stages[k] for k in step.carries},
            **options.get(step, {}),
        )
        for step in STEPS
    )
    return Stages._make(steps)


def topics_frame(conversations: Iterable[Conversation]) -> pd.DataFrame:
    """The topics frame of ``conversations``: a row per qid, in conversation order, each with its earlier turns
    (see the module docstring)."""
    rows: dict[str, dict[str, Any]] = {}
    for conversation in conversations:
        ptkb = tuple((s.id, s.text) for s in conversation.ptkb)
        for position, turn in enumerate(conversation.turns):
            if turn.qid not in rows:
                history = tuple(_turn_fields(t) for t in conversation.turns[:position])
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


def _turn_fields(turn: Turn) -> dict[str, Any]:
    """What a topics frame's ``history`` holds of an earlier turn."""
    return {"qid": turn.qid, **{name: getattr(turn, name) for name in TURN_COLUMNS}}


def _conversations(frame: pd.DataFrame) -> list[Conversation]:
    """Each row's conversation up to it (its ``history``, then itself), for :func:`cast.conversation.walker.walk`.
    A row without conversation columns is its own conversation (its qid the topic), its ``query`` the utterance;
    an earlier turn given without a qid gets ``<qid>#<position>``."""
    paths = []
    for row in frame.to_dict("records"):
        qid = str(row["qid"])
        topic = str(_cell(row, "topic_id", qid))
        history = _sequence(row.get("history"))
        chain = [
            _earlier_turn(earlier, f"{qid}#{position}", topic, position)
            for position, earlier in enumerate(history, 1)
        ]
        fields = {name: _text(row.get(name)) for name in TURN_COLUMNS}
        utterance = fields["utterance"] if fields["utterance"] is not None else str(row["query"])
        chain.append(
            Turn(
                qid=qid,
                topic_id=topic,
                turn_id=fields["turn_id"] or str(len(history) + 1),
                utterance=utterance,
                manual_rewrite=fields["manual_rewrite"],
                automatic_rewrite=fields["automatic_rewrite"],
                response=fields["response"],
                response_ids=tuple(_sequence(row.get("response_ids"))),
            )
        )
        ptkb = tuple(PTKBStatement(str(i), str(text)) for i, text in _sequence(row.get("ptkb")))
        paths.append(Conversation(topic, tuple(chain), ptkb=ptkb))
    return paths


def _earlier_turn(earlier: Any, qid: str, topic: str, position: int) -> Turn:
    """An earlier turn of a ``history`` cell: an utterance, an ``(utterance, response)`` pair or a mapping of
    :class:`~cast.core.records.Turn` fields."""
    if isinstance(earlier, str):
        fields: dict[str, Any] = {"utterance": earlier}
    elif isinstance(earlier, Mapping):
        fields = dict(earlier)
    elif isinstance(earlier, Sequence) and len(earlier) == 2:
        fields = {"utterance": earlier[0], "response": earlier[1]}
    else:
        raise CastError(
            f"history entry {earlier!r} of turn {qid.rsplit('#', 1)[0]}: give an utterance, an (utterance, "
            "response) pair or a mapping of turn fields"
        )
    if _missing(fields.get("utterance")):
        raise CastError(f"history entry {earlier!r} of turn {qid.rsplit('#', 1)[0]} has no utterance")
    text = {name: _text(fields.get(name)) for name in TURN_COLUMNS}
    return Turn(
        qid=str(_cell(fields, "qid", qid)),
        topic_id=text["topic_id"] or topic,
        turn_id=text["turn_id"] or str(position),
        utterance=str(fields["utterance"]),
        manual_rewrite=text["manual_rewrite"],
        automatic_rewrite=text["automatic_rewrite"],
        response=text["response"],
        response_ids=tuple(_sequence(fields.get("response_ids"))),
    )


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
    score = float(row["score"])
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
    query_level = {
        *pt.model.query_columns(frame),
        *CONTEXT_COLUMNS,
        "history_query",
        "question",
        "ptkb_selection",
    }
    return [c for c in frame.columns if c in query_level]


def _result_frame(
    queries: pd.DataFrame, rankings: Sequence[Sequence[ScoredPassage]], *, rank_by_score: bool = True
) -> pd.DataFrame:
    """The result frame of each query's ranking: the query's columns, then the passages' (see the module); ``rank``
    by score (ties in the ranking's order), or (``rank_by_score=False``) the ranking's order."""
    columns = _query_columns(queries)
    rows = []
    for query, ranking in zip(queries[columns].to_dict("records"), rankings, strict=True):
        order = (
            sorted(range(len(ranking)), key=lambda i: -ranking[i].score)
            if rank_by_score
            else range(len(ranking))
        )
        for rank, position in enumerate(order):
            passage = ranking[position]
            rows.append(
                {
                    **query,
                    "docno": passage.id,
                    "text": passage.passage.text,
                    "title": passage.passage.title,
                    "score": passage.score,
                    "rank": rank,
                    "first_stage_score": passage.first_stage_score,
                    "first_stage_rank": passage.first_stage_rank,
                }
            )
    return pd.DataFrame(rows, columns=[*columns, *RESULT_COLUMNS])


def _with_answers(
    frame: pd.DataFrame, answers: Sequence[Answer], verifications: Sequence[Verification | None]
) -> pd.DataFrame:
    return frame.assign(
        qanswer=[answer.text for answer in answers], answer=list(answers), verification=list(verifications)
    )


def _cell(row: Mapping[str, Any], name: str, default: Any) -> Any:
    """A row's value, or ``default`` where it has none (the column is absent, or the cell empty)."""
    value = row.get(name)
    return default if _missing(value) else value


def _text(value: Any) -> str | None:
    """A cell's text, or ``None`` where it has none."""
    return None if _missing(value) else str(value)


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
