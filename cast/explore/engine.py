"""What the explorer computes with: conversations, stages built once, cached turn results, and a job runner.

Stages are built once per distinct config section and shared: changing γ builds one new selector and reuses the
rewriter, Lucene searcher, re-ranker and linker already loaded (all stages share one :class:`Resources`). The
stages before selection remember their results, so changing only the selector or the generator re-runs only
selection and generation. Turn results are cached by (conversation up to the turn, every stage's section), so
flipping back to earlier settings is instant. Pipelines run on one worker thread (models and the JVM searcher are
not shared between threads); a job reports the stage it is in and stops at the next stage boundary once past its
time limit.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import threading
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from cast.conversation.prepared import compact_ranking
from cast.conversation.walker import Step, walk
from cast.core.config import switch_stage
from cast.core.pipeline import (
    EARLY_STAGES,
    STAGE_KINDS,
    Pipeline,
    active_section,
    check_config,
    useful_stop,
)
from cast.core.records import Conversation, Turn, TurnResult, to_dict
from cast.core.registry import build_stage, stage_class
from cast.errors import CastError
from cast.evaluate.answers import TextScorer
from cast.explore import DEFAULT_MAX_PENDING, DEFAULT_TIME_LIMIT
from cast.explore.views import SHOWN_PASSAGES, turn_view
from cast.infra.resources import Resources

logger = logging.getLogger(__name__)

MAX_CACHED_TURNS = 5000
# Turns taken as far as re-ranking or linking, kept to answer them again under other later settings.
MAX_PREPARED_TURNS = 256
MAX_KEPT_JOBS = 500
MAX_USER_CONVERSATIONS = 200
MAX_TURNS = 50

# The page's stage choices: parameter -> the stage kind whose registry name it picks.
STAGE_CHOICES = {"method": "selector", "reranker": "reranker", "generator": "summarizer"}
# The page's settings: parameter -> (stage kind, the stage's setting). A setting is applied only where the
# chosen stage takes it (``words`` means nothing to seq2seq), and reported as ignored otherwise.
STAGE_SETTINGS = {
    "gamma": ("selector", "gamma"),
    "tau": ("selector", "threshold"),
    "path_bonus": ("selector", "path_bonus"),
    "words": ("summarizer", "words"),
}


class NotFoundError(CastError):
    """A conversation, turn or job the request names does not exist (HTTP 404)."""


class InvalidRequestError(CastError):
    """A request the explorer cannot serve as asked (HTTP 400)."""


class BusyError(CastError):
    """Too many turns are being answered already (HTTP 503 with ``Retry-After``)."""


class TimeLimitError(CastError):
    """A turn took longer than the per-request time limit (HTTP 504)."""


@dataclass(frozen=True)
class Choice:
    """What the page lets the user change; ``None`` keeps the config's value."""

    method: str | None = None
    reranker: str | None = None
    generator: str | None = None
    gamma: float | None = None
    tau: float | None = None
    path_bonus: float | None = None
    words: int | None = None


def stage_settings(kind: str, name: str) -> dict[str, Any]:
    """The settings a stage declares (:mod:`cast.core.settings`), with their defaults (``None`` if none)."""
    return {
        setting.name: None if setting.required else setting.default
        for setting in stage_class(kind, name).settings().values()
    }


def stage_sections(config: dict[str, Any], choice: Choice) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Every stage's config section once ``choice`` is applied to ``config``, and the settings not applied.

    A stage chosen by another name keeps those of its config section's settings that it also takes (e.g. the
    selector's ``candidates`` and ``n`` when switching from EG to O), as ``--set SECTION.name=`` does
    (:func:`cast.core.config.switch_stage`).

    Raises:
        ConfigError: a chosen name is not a registered stage.
    """
    sections = {kind: copy.deepcopy(config[kind]) for kind in STAGE_KINDS}
    for param, kind in STAGE_CHOICES.items():
        name = getattr(choice, param)
        if name is not None and name != sections[kind]["name"]:
            stage_class(kind, name)  # an unknown name is the request's error
            sections[kind] = switch_stage(kind, sections[kind], name)[0]
    ignored = []
    for param, (kind, setting) in STAGE_SETTINGS.items():
        value = getattr(choice, param)
        if value is None:
            continue
        if setting in stage_settings(kind, sections[kind]["name"]):
            sections[kind][setting] = value
        else:
            ignored.append(param)
    return sections, ignored


def current_params(sections: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The page's parameters as ``sections`` set them (a setting the chosen stage does not take is ``None``)."""
    params: dict[str, Any] = {param: sections[kind]["name"] for param, kind in STAGE_CHOICES.items()}
    for param, (kind, setting) in STAGE_SETTINGS.items():
        defaults = stage_settings(kind, sections[kind]["name"])
        params[param] = sections[kind].get(setting, defaults.get(setting))
    return params


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def turn_key(conversation: Conversation, number: int, sections: dict[str, dict[str, Any]]) -> str:
    """The cache key of turn ``number`` (1-based): the conversation up to it and every stage's settings."""
    turns = [to_dict(t) for t in conversation.turns[:number]]
    text = canonical({"topic": conversation.topic_id, "turns": turns, "stages": sections})
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prepared_key(
    conversation: Conversation,
    number: int,
    sections: dict[str, dict[str, Any]],
    stop_after: str,
    answers_as_responses: bool,
) -> str:
    """The cache key of turn ``number`` prepared as far as ``stop_after``: the stages it ran, unless earlier
    turns' answers were their responses (then every stage's settings shaped it)."""
    if answers_as_responses:
        return turn_key(conversation, number, sections) + f":{stop_after}"
    early = {kind: sections[kind] for kind in EARLY_STAGES[stop_after] if kind in sections}
    return turn_key(conversation, number, early) + f":{stop_after}"


@dataclass(frozen=True)
class Answered:
    """A turn's pipeline result and the page's view of it."""

    result: TurnResult
    view: dict[str, Any]


class LruCache:
    """A bounded in-memory mapping, least recently used entries dropped first (thread-safe)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._items: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Any:
        """The value under ``key``, or None."""
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class Conversations:
    """The loaded topics (read-only) and conversations typed in the page (turns added one by one)."""

    def __init__(self, loaded: Sequence[Conversation]):
        self._items: dict[str, Conversation] = {}
        self._editable: set[str] = set()
        self._lock = threading.Lock()
        self._next_user = 1
        paths = Counter(c.topic_id for c in loaded)
        seen: Counter[str] = Counter()
        for conversation in loaded:
            # CAsT 2022 lists each path through a topic's tree as a conversation of the same topic.
            seen[conversation.topic_id] += 1
            copy_number = seen[conversation.topic_id]
            cid = conversation.topic_id if copy_number == 1 else f"{conversation.topic_id}~{copy_number}"
            title = conversation.title or f"Topic {conversation.topic_id}"
            if paths[conversation.topic_id] > 1:
                title = f"{title} · path {copy_number}"
            self._items[cid] = replace(conversation, title=title)

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._items)

    def get(self, cid: str) -> Conversation:
        with self._lock:
            if cid not in self._items:
                raise NotFoundError(f"no conversation {cid!r}; GET /api/conversations lists them")
            return self._items[cid]

    def editable(self, cid: str) -> bool:
        return cid in self._editable

    def create(self, title: str | None = None) -> str:
        """A new, empty conversation to type turns into; returns its id (also its topic id)."""
        with self._lock:
            if len(self._editable) >= MAX_USER_CONVERSATIONS:
                raise InvalidRequestError(
                    f"at most {MAX_USER_CONVERSATIONS} typed conversations per server; restart it to start afresh"
                )
            while f"user-{self._next_user}" in self._items:
                self._next_user += 1
            cid = f"user-{self._next_user}"
            self._items[cid] = Conversation(
                topic_id=cid, turns=(), title=title or f"Conversation {self._next_user}"
            )
            self._editable.add(cid)
            return cid

    def add_turn(self, cid: str, utterance: str, manual_rewrite: str | None = None) -> Conversation:
        """Append a typed turn to conversation ``cid`` (one created with :meth:`create`)."""
        conversation = self.get(cid)
        if cid not in self._editable:
            raise InvalidRequestError(
                f"conversation {cid!r} comes from the topics file and cannot be changed; create a new one"
            )
        if not utterance.strip():
            raise InvalidRequestError("the utterance is empty: type a question")
        with self._lock:
            conversation = self._items[cid]
            if len(conversation.turns) >= MAX_TURNS:
                raise InvalidRequestError(f"a conversation has at most {MAX_TURNS} turns")
            number = str(len(conversation.turns) + 1)
            turn = Turn(
                qid=f"{cid}_{number}",
                topic_id=cid,
                turn_id=number,
                utterance=utterance.strip(),
                manual_rewrite=manual_rewrite.strip() if manual_rewrite and manual_rewrite.strip() else None,
            )
            conversation = replace(conversation, turns=(*conversation.turns, turn))
            self._items[cid] = conversation
            return conversation


@dataclass
class Job:
    """One request to answer a turn (and the turns before it that are not cached yet).

    Attributes:
        status: ``queued``, ``running``, ``done`` or ``failed``.
        stage: what is being done now (a stage kind, or ``loading <kind>`` while a stage is built).
        turn: the turn being answered (1-based), of ``total_turns``.
        deadline: ``time.monotonic()`` after which the job stops at the next stage boundary.
    """

    id: str
    key: str
    conversation_id: str
    total_turns: int
    sections: dict[str, dict[str, Any]]
    ignored: list[str]
    time_limit: float
    started: float = field(default_factory=time.monotonic)
    status: str = "queued"
    stage: str | None = None
    turn: int = 1
    answered: Answered | None = None
    cached: bool = False
    error: Exception | None = None
    failed_stage: str | None = None
    finished: threading.Event = field(default_factory=threading.Event)
    # Called once finished (a waiting request's wake-up): see when_finished.
    _callbacks: list[Callable[[], object]] = field(default_factory=list, repr=False, compare=False)
    _callbacks_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def deadline(self) -> float:
        return self.started + self.time_limit

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def enter(self, stage: str) -> None:
        """Record that ``stage`` starts now; past the deadline, stop instead."""
        if time.monotonic() > self.deadline:
            raise TimeLimitError(
                f"answering took longer than the time limit of {self.time_limit:g} s (stopped before the {stage} "
                f"stage of turn {self.turn}); turns already answered are cached, so asking again continues from "
                f"there (or start the server with a larger --time-limit)"
            )
        self.stage = stage

    def finish(self, answered: Answered) -> None:
        self.answered, self.status, self.stage = answered, "done", None
        self._set_finished()

    def fail(self, error: Exception) -> None:
        self.error, self.failed_stage, self.status = error, self.stage, "failed"
        self._set_finished()

    def when_finished(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` (from the worker thread) once the job is done or failed; now if it is already."""
        with self._callbacks_lock:
            if not self.finished.is_set():
                self._callbacks.append(callback)
                return
        callback()

    def _set_finished(self) -> None:
        with self._callbacks_lock:
            self.finished.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()


class Explorer:
    """The explorer's state: config, conversations, qrels, built stages, cached results and running jobs.

    Args:
        config: the resolved pipeline config (its index, cache and stage sections are the page's defaults).
        conversations: the conversations to offer.
        qrels: relevance judgements by qid, for per-turn evaluation (optional).
        time_limit: seconds a request may take before it is stopped (at the next stage boundary).
        max_pending: turns that may be answered or wait to be at once; a request for one more is refused
            with :class:`BusyError`.
    """

    def __init__(
        self,
        config: dict[str, Any],
        conversations: Sequence[Conversation] = (),
        qrels: dict[str, dict[str, int]] | None = None,
        time_limit: float = DEFAULT_TIME_LIMIT,
        max_pending: int = DEFAULT_MAX_PENDING,
    ):
        self.resources = Resources(config)
        check_config(config, self.resources)
        self.resources.check_device()
        self.config = config
        self.conversations = Conversations(conversations)
        self.qrels = qrels or {}
        self.time_limit = time_limit
        self.max_pending = max_pending
        self.results = LruCache(MAX_CACHED_TURNS)
        self._prepared = LruCache(MAX_PREPARED_TURNS)
        self._scorer: Any = None
        self._stages: dict[str, Any] = {}
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._jobs_lock = threading.Lock()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cast-explore")

    def close(self) -> None:
        """Stop taking jobs (a job already running finishes its current stage in the background)."""
        self._worker.shutdown(wait=False, cancel_futures=True)

    def default_sections(self) -> dict[str, dict[str, Any]]:
        return stage_sections(self.config, Choice())[0]

    def stage(self, kind: str, section: dict[str, Any], job: Job | None = None) -> Any:
        """The stage built from ``section``, built once (on the worker thread) and shared by every pipeline."""
        key = canonical({"kind": kind, "section": section})
        if key not in self._stages:
            if job is not None:
                job.enter(f"loading {kind}")
            self._stages[key] = build_stage(kind, section, self.resources)
        return self._stages[key]

    def warm_up(self) -> None:
        """Build the config's own stages now (so that a bad config fails at start, not at the first request)."""
        self._worker.submit(self._build_default).result()

    def _build_default(self) -> None:
        for kind, section in self.default_sections().items():
            self.stage(kind, section)
        self.resources.searcher()  # opens the index (and starts the JVM) now, not in the first request

    def submit(self, conversation_id: str, turn: int, choice: Choice) -> Job:
        """A job answering turn ``turn`` (1-based) of a conversation: already done if cached, else queued.

        Raises:
            NotFoundError: no such conversation or turn.
            ConfigError: a chosen stage name is not registered.
        """
        conversation = self.conversations.get(conversation_id)
        if not 1 <= turn <= len(conversation.turns):
            raise NotFoundError(
                f"conversation {conversation_id!r} has {len(conversation.turns)} turn(s); there is no turn {turn}"
            )
        sections, ignored = stage_sections(self.config, choice)
        keys = [turn_key(conversation, number, sections) for number in range(1, turn + 1)]
        job = Job(
            id=uuid.uuid4().hex,
            key=keys[-1],
            conversation_id=conversation_id,
            total_turns=turn,
            sections=sections,
            ignored=ignored,
            time_limit=self.time_limit,
        )
        cached = self.results.get(job.key)
        if cached is not None:
            job.cached, job.turn = True, turn
            job.finish(cached)
            self._keep(job)
            return job
        with self._jobs_lock:
            pending = [other for other in self._jobs.values() if other.status in ("queued", "running")]
            for other in pending:
                if other.key == job.key:
                    return other  # the same turn with the same settings is on its way already
            if len(pending) >= self.max_pending:
                raise BusyError(
                    f"the server is answering {len(pending)} turns already (at most {self.max_pending} at once); "
                    "ask again in a moment"
                )
            self._keep_locked(job)
        self._worker.submit(self._run, job, conversation, keys)
        return job

    def job(self, job_id: str) -> Job:
        with self._jobs_lock:
            if job_id not in self._jobs:
                raise NotFoundError(
                    f"no job {job_id!r} (jobs are kept for the {MAX_KEPT_JOBS} latest requests)"
                )
            return self._jobs[job_id]

    def _keep(self, job: Job) -> None:
        with self._jobs_lock:
            self._keep_locked(job)

    def _keep_locked(self, job: Job) -> None:
        self._jobs[job.id] = job
        while len(self._jobs) > MAX_KEPT_JOBS:
            oldest = next(iter(self._jobs))
            if not self._jobs[oldest].finished.is_set():
                break
            del self._jobs[oldest]

    def _run(self, job: Job, conversation: Conversation, keys: Sequence[str]) -> None:
        job.status = "running"
        try:
            # The page's choices over the config's sections: the optional stages the config fills (a PTKB
            # selector, an answer verifier) run as configured, not live controls.
            configured = {slot.kind: active_section(self.config, slot) for slot in Pipeline.composition}
            sections = {**configured, **job.sections}
            stages = {
                kind: self.stage(kind, section, job)
                for kind, section in sections.items()
                if section is not None
            }
            # Each stage reports itself to the job (and stops it past its time limit) as it starts.
            pipeline = Pipeline(config={**self.config, **job.sections}, on_stage=job.enter, **stages)
            # A typed conversation has no topics' responses: what the user read is the response.
            typed = self.conversations.editable(job.conversation_id)
            rule = True if typed else pipeline.answers_as_responses
            # Prepared turns are kept, so that changing only the selector or the generator re-runs neither
            # Lucene nor the neural models.
            stop_after = useful_stop(pipeline.selector.needs_entities)
            turns = replace(conversation, turns=conversation.turns[: len(keys)])
            numbers = {turn.qid: number for number, turn in enumerate(turns.turns, start=1)}
            cached = {qid: self.results.get(keys[number - 1]) for qid, number in numbers.items()}
            done = {qid: answered.result.past_turn(rule) for qid, answered in cached.items() if answered}

            def answer(steps: list[Step]) -> list[Answered]:
                [step] = steps  # one conversation: one turn at a time
                number = job.turn = numbers[step.turn.qid]
                early = prepared_key(conversation, number, job.sections, stop_after, rule)
                prepared = self._prepared.get(early)
                if prepared is None:
                    [prepared] = pipeline.prepare_batch(
                        [(step.history, step.turn)], [conversation.ptkb], stop_after=stop_after
                    )
                    # Later stages and the page read the head's texts; the whole ranking's are ~1 MB a turn.
                    keep = max(SHOWN_PASSAGES, pipeline.candidates)
                    prepared = replace(prepared, ranking=compact_ranking(prepared.ranking, keep))
                    self._prepared.put(early, prepared)
                [result] = pipeline.finish_batch([(step.history, prepared)])
                job.enter("evaluate")
                view = turn_view(
                    result,
                    number=number,
                    reranked_depth=int(pipeline.reranker.depth),
                    qrels=self.qrels,
                    text_scorer=self._text_scorer,
                )
                answered = Answered(replace(result, ranking=result.ranking[:SHOWN_PASSAGES]), view)
                self.results.put(keys[number - 1], answered)
                return [answered]

            walk([turns], answer, lambda answered: answered.result.past_turn(rule), done=done)
            job.turn = len(keys)
            answered = cached[turns.turns[-1].qid] or self.results.get(keys[-1])
            assert answered is not None, "a job answers at least one turn"
            job.finish(answered)
        except CastError as error:
            job.fail(error)
        except Exception as error:  # a bug in a stage: report it in the page, keep serving
            logger.exception("explore: turn %s of %s failed", job.turn, job.conversation_id)
            job.fail(error)

    def _text_scorer(self) -> Any:
        """ROUGE, BLEU and METEOR of an answer against references (built on first use)."""
        if self._scorer is None:
            self._scorer = TextScorer().score
        return self._scorer
