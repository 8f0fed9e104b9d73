"""Topics and qrels from ir_datasets: ``--topics irds:trec-cast/v1/2020``, ``--qrels irds:trec-cast/v1/2020``.

Every command that reads topics or qrels takes a dataset id of ir_datasets (the ``irds`` extra: ``pip install
'cast-toolkit[irds]'``) after ``irds:``, wherever it takes a file (:func:`cast.formats.topics.load_topics`,
:func:`cast.formats.topics.read_qrels`). ir_datasets reads its copies of the files from ``IR_DATASETS_HOME``
(``~/.ir_datasets``), downloading those it lacks once.

The conversational datasets it knows (ir_datasets 0.6: CAsT 2019 and 2020; its CAsT 2021 and 2022 entries are not
registered, and it has no iKAT dataset) give conversations as :func:`cast.formats.topics.load_topics` reads the same
files: each query's ``topic_number`` and ``turn_number`` make the qid ``<topic>_<turn>``, ``raw_utterance`` the
utterance, ``manual_rewritten_utterance`` and ``automatic_rewritten_utterance`` the rewrites, ``topic_title`` and
``topic_description`` the conversation's title and description, ``manual_canonical_result_id`` (2020) the
response id. CAsT 2019's manual rewrites are not in ir_datasets: add them with ``--rewrites`` as for the file.

Example:
    >>> conversations = load_topics("irds:trec-cast/v1/2020")  # doctest: +SKIP
    >>> conversations[0].turns[1].manual_rewrite  # doctest: +SKIP
    'What are the causes of throat cancer?'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cast.core.records import Conversation, Turn
from cast.errors import CastError
from cast.infra.extras import require_extra

PREFIX = "irds:"
# The query fields a conversational dataset has (ir_datasets' Cast*Query records).
CONVERSATIONAL = ("query_id", "raw_utterance", "topic_number", "turn_number")
# Turn fields read from a query's fields, where its record type has them.
TURN_FIELDS = {
    "manual_rewrite": "manual_rewritten_utterance",
    "automatic_rewrite": "automatic_rewritten_utterance",
    "response": "response",
}


def is_irds(source: str | Path | Mapping[str, Any]) -> bool:
    """Whether a topics or qrels argument names an ir_datasets dataset (``irds:<id>``; a command line's
    ``type=Path`` argument too)."""
    return isinstance(source, str | Path) and str(source).startswith(PREFIX)


def read_irds_topics(source: str) -> list[Conversation]:
    """The conversations of the ir_datasets dataset ``irds:<id>``, in its order.

    Raises:
        CastError: the extra is not installed, ir_datasets knows no such dataset, its queries are not
            conversational turns, or its files cannot be read (nor downloaded).
    """
    dataset = _dataset(source, "queries")
    fields = dataset.queries_cls()._fields
    if not all(name in fields for name in CONVERSATIONAL):
        raise CastError(
            f"{source}: its queries are not conversation turns (no {', '.join(n for n in CONVERSATIONAL if n not in fields)}); "
            f"conversational datasets ir_datasets knows: {', '.join(conversational_ids())}"
        )
    if "parent_id" in fields:  # CAsT 2022's tree of paths: the flattened topics file gives its paths
        raise CastError(
            f"{source}: topics that branch (parent_id) are read from the organisers' flattened file"
        )
    conversations: dict[str, list[Any]] = {}
    for query in _read(source, dataset.queries_iter(), dataset.queries_handler()):
        conversations.setdefault(str(query.topic_number), []).append(query)
    for topic_id, queries in conversations.items():
        numbers = [int(query.turn_number) for query in queries]
        if numbers != list(range(1, len(numbers) + 1)):  # e.g. a `judged` subset, which drops unjudged turns
            raise CastError(
                f"{source}: conversation {topic_id} lacks some of its turns (it has turns {numbers[:8]}), whose "
                "utterances are the history of later ones: read the whole dataset (without /judged); the measures "
                "leave out the turns its qrels do not judge"
            )
    return [_conversation(topic_id, queries) for topic_id, queries in conversations.items()]


def read_irds_qrels(source: str) -> dict[str, dict[str, int]]:
    """``{qid: {docid: relevance}}`` of the ir_datasets dataset ``irds:<id>`` (a pair judged twice keeps its last
    grade, as trec_eval does).

    Raises:
        CastError: as :func:`read_irds_topics`, or the dataset has no qrels.
    """
    qrels: dict[str, dict[str, int]] = {}
    dataset = _dataset(source, "qrels")
    for qrel in _read(source, dataset.qrels_iter(), dataset.qrels_handler()):
        qrels.setdefault(str(qrel.query_id), {})[str(qrel.doc_id)] = int(qrel.relevance)
    if not qrels:
        raise CastError(f"{source}: the dataset's qrels are empty")
    return qrels


def conversational_ids() -> list[str]:
    """The ids of the datasets ir_datasets knows whose queries are conversation turns (with ``irds:``)."""
    import logging

    import ir_datasets

    found = []
    logging.disable(logging.INFO)  # looking a dataset up says, for some, that it is deprecated
    try:
        for dataset_id in ir_datasets.registry:
            dataset = ir_datasets.registry[dataset_id]
            if dataset.has_queries() and all(n in dataset.queries_cls()._fields for n in CONVERSATIONAL):
                found.append(PREFIX + dataset_id)
    finally:
        logging.disable(logging.NOTSET)
    return sorted(found)


def _dataset(source: str, what: str) -> Any:
    require_extra("irds", f"{PREFIX}...")
    import ir_datasets

    dataset_id = source.removeprefix(PREFIX)
    if dataset_id not in ir_datasets.registry:
        raise CastError(
            f"ir_datasets knows no dataset {dataset_id!r}; its conversational datasets: "
            f"{', '.join(conversational_ids())}"
        )
    dataset = ir_datasets.load(dataset_id)
    if not getattr(dataset, f"has_{what}")():
        raise CastError(f"{source}: the dataset has no {what}")
    return dataset


def _read(source: str, records: Iterable[Any], handler: Any) -> list[Any]:
    """Every record, or one line saying why ir_datasets could not read (or download) them, naming the files it
    lacks (``handler``: the dataset's queries or qrels handler, which knows them)."""
    import logging

    from ir_datasets.util import home_path

    # ir_datasets logs each download try and its failure: what went wrong is said once, below.
    logging.disable(logging.WARNING)
    try:
        return list(records)
    except Exception as e:  # ir_datasets raises what its download or parser met: name the place to look at
        reason = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
        missing = [(path, url) for path, url in expected_files(handler) if not path.is_file()]
        if missing:
            files = "; ".join(f"{path} (from {url})" for path, url in missing)
            raise CastError(
                f"{source}: ir_datasets lacks its file(s) {files} and could not download them ({reason}): put "
                f"them there, or set IR_DATASETS_HOME (now {home_path()}) to a folder that holds them"
            ) from e
        raise CastError(
            f"{source}: ir_datasets could not read its files ({reason}); it reads them from IR_DATASETS_HOME "
            f"({home_path()}) and downloads those it lacks"
        ) from e
    finally:
        logging.disable(logging.NOTSET)


def expected_files(handler: Any, depth: int = 3) -> list[tuple[Path, str]]:
    """The files an ir_datasets queries or qrels handler reads, as ``(path under IR_DATASETS_HOME, the address
    it downloads it from)``: its downloads, and those of the handlers it wraps (a ``judged`` subset's)."""
    found: list[tuple[Path, str]] = []
    for value in vars(handler).values() if hasattr(handler, "__dict__") else ():
        path = getattr(value, "_cache_path", None)
        if path is not None:
            mirrors = getattr(value, "mirrors", None) or []
            url = getattr(mirrors[0], "url", "its address") if mirrors else "its address"
            found.append((Path(path), str(url)))
        elif depth > 0 and type(value).__module__.startswith("ir_datasets"):
            found.extend(expected_files(value, depth - 1))
    return list(dict.fromkeys(found))


def _conversation(topic_id: str, queries: list[Any]) -> Conversation:
    first = queries[0]
    return Conversation(
        topic_id,
        tuple(_turn(topic_id, query) for query in queries),
        title=getattr(first, "topic_title", None) or None,
        description=getattr(first, "topic_description", None) or None,
    )


def _turn(topic_id: str, query: Any) -> Turn:
    fields = query._asdict()
    texts: dict[str, str | None] = {name: fields.get(source) or None for name, source in TURN_FIELDS.items()}
    canonical = fields.get("manual_canonical_result_id")
    return Turn(
        qid=str(query.query_id),
        topic_id=topic_id,
        turn_id=str(query.turn_number),
        utterance=query.raw_utterance,
        manual_rewrite=texts["manual_rewrite"],
        automatic_rewrite=texts["automatic_rewrite"],
        response=texts["response"],
        response_ids=(str(canonical),) if canonical else (),
    )
