"""Nugget-based answer evaluation, as TREC RAG 2024 and iKAT 2024 judge answers: the AutoNuggetizer design
(Pradeep et al., "Initial Nugget Evaluation Results for the TREC 2024 RAG Track with the AutoNuggetizer
Framework", arXiv 2411.09607), with any chat model behind an OpenAI-compatible server.

Three steps, each a prompt under ``configs/prompts/``:

1. **Nuggets** (``nugget-create``): the model reads a turn's references (its relevant passages or its written
   response), ``batch`` at a time, and updates a list of atomic facts a good answer holds (at most
   ``max_nuggets``).
2. **Importance** (``nugget-label``): each nugget is labelled ``vital`` (a good answer must hold it) or ``okay``.
3. **Support** (``nugget-assign``): for each answer, each nugget is labelled ``support``, ``partial_support`` or
   ``not_support`` by the answer.

Nuggets and their labels are written to a JSONL file (one turn a line) that a person can review and correct and
that later evaluations reuse, so every system is judged against the same nuggets. The scores of an answer
(:func:`nugget_scores`): the share of nuggets it supports (``all_strict``), partial support counting half
(``all_partial``), and both over the vital nuggets only (``vital_strict``, the track's headline measure;
``vital_partial``). Every model answer goes through the one cache, so a rerun asks nothing again.

Small models answer in loose forms: a list is read as a Python or JSON list, else as one item a line (bullets and
numbers taken off); labels are read in order as the words they are, and a nugget the reply gives no label is
counted as ``not_support`` (or ``okay``) and the count of such gaps is reported. A very small model also copies
the prompt's own instructions into its reply; a list item or reply line that shares a run of words with them
(:func:`echoes`) is left out, so that "label each nugget as support, partial_support or not_support" is read as
no label, not three. The replies nothing could be read from are counted by step (:attr:`Nuggetizer.unusable`).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cast.errors import DataFormatError
from cast.infra.atomic import write_text_atomic
from cast.infra.prompts import PromptTemplate

IMPORTANCE = ("vital", "okay")
SUPPORT = ("support", "partial_support", "not_support")
SUPPORT_VALUE = {"support": 1.0, "partial_support": 0.5, "not_support": 0.0}
MEASURES = ("all_strict", "all_partial", "vital_strict", "vital_partial")
# "partial support", "partial_support", "Partial-Support"; "not support", "no support", "unsupported".
_SUPPORT_WORD = re.compile(
    r"partial[\s_-]*support|not[\s_-]*support|no[\s_-]*support|unsupported|support", re.I
)
_IMPORTANCE_WORD = re.compile(r"vital|okay|ok\b", re.I)
_ITEM_MARK = re.compile(r"^\s*(?:[-*•]|\d+[.)]|\[\d+\])\s*")
_WORD = re.compile(r"\w+")
_PLACEHOLDER = re.compile(r"\{\{\w+\}\}")
# A run of this many words shared with the prompt's instructions is an echo of them (shorter texts: all of theirs,
# from 3 words); the instructions' 5-word runs are phrases no fact about a turn repeats.
ECHO_WORDS = 5


@dataclass(frozen=True)
class Nugget:
    """An atomic fact a good answer to a turn holds, and how important it is (``vital`` or ``okay``)."""

    text: str
    importance: str = "okay"


@dataclass(frozen=True)
class TurnNuggets:
    """A turn's nuggets and what they were made from (a line of the nuggets file)."""

    qid: str
    query: str
    source: str
    nuggets: tuple[Nugget, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "qid": self.qid,
            "query": self.query,
            "source": self.source,
            "nuggets": [{"text": n.text, "importance": n.importance} for n in self.nuggets],
        }


# --- scores (pure) ---------------------------------------------------------------------------------------------


def nugget_scores(nuggets: Sequence[Nugget], support: Sequence[str]) -> dict[str, float]:
    """An answer's scores from the support label of each of a turn's nuggets (nan where a turn has no nugget, or
    no vital one, to score against).

    Example:
        >>> nuggets = [Nugget("a", "vital"), Nugget("b", "vital"), Nugget("c", "okay")]
        >>> nugget_scores(nuggets, ["support", "partial_support", "not_support"])
        {'all_strict': 0.3333333333333333, 'all_partial': 0.5, 'vital_strict': 0.5, 'vital_partial': 0.75}
    """
    if len(nuggets) != len(support):
        raise ValueError(f"{len(nuggets)} nuggets but {len(support)} support labels")

    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else math.nan

    strict = [float(s == "support") for s in support]
    partial = [SUPPORT_VALUE[s] for s in support]
    vital = [i for i, n in enumerate(nuggets) if n.importance == "vital"]
    return {
        "all_strict": mean(strict),
        "all_partial": mean(partial),
        "vital_strict": mean([strict[i] for i in vital]),
        "vital_partial": mean([partial[i] for i in vital]),
    }


# --- reading what a model wrote (pure) ---------------------------------------------------------------------------


def parse_items(reply: str) -> list[str]:
    """The strings of a list a model wrote: a Python or JSON list (the first ``[...]`` in the reply), else one
    item a line, bullets and numbers taken off; empty items out.

    Example:
        >>> parse_items('Sure! ["Curie won two Nobel Prizes", "She discovered polonium"]')
        ['Curie won two Nobel Prizes', 'She discovered polonium']
        >>> parse_items("1. Curie won two Nobel Prizes\\n- She discovered polonium")
        ['Curie won two Nobel Prizes', 'She discovered polonium']
    """
    start, end = reply.find("["), reply.rfind("]")
    if 0 <= start < end:
        for read in (json.loads, ast.literal_eval):
            try:
                value = read(reply[start : end + 1])
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return [v.strip() for v in value if v.strip()]
    items = []
    for line in reply.splitlines():
        item = _ITEM_MARK.sub("", line).strip().strip("\"',").strip()
        if item and not item.endswith(":"):  # "Here is the list:" introduces, it is no item
            items.append(item)
    return items


def parse_labels(reply: str, count: int, kind: str) -> list[str | None]:
    """The first ``count`` labels of ``kind`` (``support`` or ``importance``) in a model's reply, in order, each
    normalised (``"Partial support"`` -> ``partial_support``); ``None`` for each one the reply lacks.

    Example:
        >>> parse_labels("['support', 'Partial support']", 3, "support")
        ['support', 'partial_support', None]
    """
    found: list[str | None] = []
    pattern = _SUPPORT_WORD if kind == "support" else _IMPORTANCE_WORD
    for match in pattern.finditer(reply):
        word = re.sub(r"[\s_-]+", "_", match[0].lower())
        if kind == "support":
            label = (
                "partial_support"
                if word.startswith("partial")
                else "support"
                if word == "support"
                else "not_support"
            )
        else:
            label = "vital" if word == "vital" else "okay"
        found.append(label)
    return (found + [None] * count)[:count]


def instruction_runs(template: PromptTemplate) -> frozenset[tuple[str, ...]]:
    """The runs of 3 to :data:`ECHO_WORDS` words (lowercased) of a template's own text, placeholders left out."""
    words = _WORD.findall(_PLACEHOLDER.sub(" ", " ".join(body for _, body in template.messages)).lower())
    return frozenset(
        tuple(words[i : i + n]) for n in range(3, ECHO_WORDS + 1) for i in range(len(words) - n + 1)
    )


def echoes(text: str, instructions: frozenset[tuple[str, ...]]) -> bool:
    """Whether ``text`` repeats the prompt's instructions (:func:`instruction_runs`): a run of :data:`ECHO_WORDS` of
    its words is theirs (all its words, for a text of 3 to 4 words).

    Example:
        >>> runs = frozenset({("label", "each", "nugget", "as", "support")})
        >>> echoes("Label each nugget as support or not.", runs), echoes("Curie won a Nobel Prize", runs)
        (True, False)
    """
    words = _WORD.findall(text.lower())
    n = min(ECHO_WORDS, len(words))
    return n >= 3 and any(tuple(words[i : i + n]) in instructions for i in range(len(words) - n + 1))


# --- the nuggets file ----------------------------------------------------------------------------------------------


def write_nuggets(path: Path, turns: Sequence[TurnNuggets]) -> None:
    write_text_atomic(path, "".join(json.dumps(t.to_dict(), ensure_ascii=False) + "\n" for t in turns))


def read_nuggets(path: Path) -> dict[str, TurnNuggets]:
    """The nuggets file written by :func:`write_nuggets` (perhaps edited by hand), by qid.

    Raises:
        DataFormatError: a line is not a turn's nuggets, or a label is not ``vital`` or ``okay``.
    """
    turns: dict[str, TurnNuggets] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            nuggets = tuple(Nugget(str(n["text"]), n.get("importance", "okay")) for n in record["nuggets"])
            turn = TurnNuggets(
                str(record["qid"]), str(record["query"]), str(record.get("source", "")), nuggets
            )
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise DataFormatError(path, f"not a turn's nuggets ({type(e).__name__}: {e})", number) from None
        wrong = [n.importance for n in nuggets if n.importance not in IMPORTANCE]
        if wrong:
            raise DataFormatError(path, f"importance {wrong[0]!r}: use vital or okay", number)
        turns[turn.qid] = turn
    return turns


# --- asking the model --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NuggetSettings:
    """How nuggets are made and judged (the track's: at most 30 nuggets, 10 references or nuggets a request)."""

    model: str
    max_nuggets: int = 30
    batch: int = 10
    max_tokens: int = 512
    reference_words: int = 300
    temperature: float = 0.0
    seed: int | None = 0


class Nuggetizer:
    """The three steps of the module docstring against one chat model, through a
    :class:`cast.infra.llm.ChatClient` (whose cache keeps every answer). Turns are asked side by side."""

    def __init__(self, client: Any, settings: NuggetSettings):
        self.client = client
        self.settings = settings
        self.create_template = PromptTemplate.load(
            "nugget-create", frozenset({"query", "references", "nuggets", "count", "max_nuggets"})
        )
        self.label_template = PromptTemplate.load("nugget-label", frozenset({"query", "nuggets", "count"}))
        self.assign_template = PromptTemplate.load(
            "nugget-assign", frozenset({"query", "answer", "nuggets", "count"})
        )
        self.instructions = {
            t.name: instruction_runs(t)
            for t in (self.create_template, self.label_template, self.assign_template)
        }
        self.unlabelled = 0  # labels the model left out (counted as okay / not_support)
        self.replies: Counter[str] = Counter()  # replies read, by step: create, label, assign
        self.unusable: Counter[str] = Counter()  # of those, replies nothing could be read from, by step
        self.echoed = 0  # list items and reply lines left out as echoes of the prompt

    def describe(self) -> dict[str, Any]:
        return {
            "model": self.settings.model,
            "prompts": {
                t.name: t.sha256 for t in (self.create_template, self.label_template, self.assign_template)
            },
        }

    def _ask(self, conversations: list[list[dict[str, str]]]) -> list[str]:
        s = self.settings
        parameters: dict[str, Any] = {"temperature": s.temperature, "max_tokens": s.max_tokens}
        if s.seed is not None:
            parameters["seed"] = s.seed
        return [r.text for r in self.client.complete_many(s.model, conversations, **parameters)]

    def create(
        self, queries: Mapping[str, str], references: Mapping[str, Sequence[str]]
    ) -> dict[str, list[str]]:
        """Each turn's nugget texts, updated over its references ``batch`` at a time."""
        s = self.settings
        nuggets: dict[str, list[str]] = {qid: [] for qid in queries}
        rounds = max((math.ceil(len(references[q]) / s.batch) for q in queries), default=0)
        for step in range(rounds):
            asked = [q for q in queries if step * s.batch < len(references[q])]
            prompts = []
            for qid in asked:
                batch = references[qid][step * s.batch : (step + 1) * s.batch]
                numbered = "\n".join(
                    f"[{i}] {' '.join(text.split()[: s.reference_words])}"
                    for i, text in enumerate(batch, start=1)
                )
                prompts.append(
                    self.create_template.render(
                        query=queries[qid],
                        references=numbered,
                        nuggets=json.dumps(nuggets[qid], ensure_ascii=False),
                        count=str(len(nuggets[qid])),
                        max_nuggets=str(s.max_nuggets),
                    )
                )
            for qid, reply in zip(asked, self._ask(prompts), strict=True):
                items = parse_items(reply)
                kept = [
                    item for item in items if not echoes(item, self.instructions[self.create_template.name])
                ]
                self._count("create", len(items) - len(kept), bool(kept))
                updated = list(dict.fromkeys(kept))[: s.max_nuggets]
                nuggets[qid] = updated or nuggets[qid]  # a reply with no list keeps the list as it was
        return nuggets

    def label(
        self, queries: Mapping[str, str], texts: Mapping[str, Sequence[str]]
    ) -> dict[str, list[Nugget]]:
        """Each turn's nuggets labelled vital or okay, ``batch`` nuggets a request."""
        batches = [
            (qid, start) for qid in queries for start in range(0, len(texts[qid]), self.settings.batch)
        ]
        prompts = [
            self._nugget_prompt(self.label_template, queries[q], texts[q][i : i + self.settings.batch])
            for q, i in batches
        ]
        labelled: dict[str, list[Nugget]] = {qid: [] for qid in queries}
        for (qid, start), reply in zip(batches, self._ask(prompts), strict=True):
            batch = texts[qid][start : start + self.settings.batch]
            labels = parse_labels(
                self._without_echo(reply, self.label_template, "label"), len(batch), "importance"
            )
            self.unlabelled += labels.count(None)
            labelled[qid] += [
                Nugget(text, label or "okay") for text, label in zip(batch, labels, strict=True)
            ]
        return labelled

    def assign(
        self, query: Mapping[str, str], nuggets: Mapping[str, Sequence[Nugget]], answers: Mapping[str, str]
    ) -> dict[str, list[str]]:
        """Each answered turn's support label for each of its nuggets, ``batch`` nuggets a request."""
        batches = [
            (qid, start) for qid in answers for start in range(0, len(nuggets[qid]), self.settings.batch)
        ]
        prompts = [
            self._nugget_prompt(
                self.assign_template,
                query[q],
                [n.text for n in nuggets[q][i : i + self.settings.batch]],
                answer=answers[q],
            )
            for q, i in batches
        ]
        support: dict[str, list[str]] = {qid: [] for qid in answers}
        for (qid, start), reply in zip(batches, self._ask(prompts), strict=True):
            count = len(nuggets[qid][start : start + self.settings.batch])
            labels = parse_labels(self._without_echo(reply, self.assign_template, "assign"), count, "support")
            self.unlabelled += labels.count(None)
            support[qid] += [label or "not_support" for label in labels]
        return support

    def reply_counts(self) -> str:
        """What the model's replies gave: the labels left out, the echoes left out, the replies nothing could be
        read from by step (replies from the cache counted too)."""
        unusable = ", ".join(
            f"{step} {self.unusable[step]}/{n} ({self.unusable[step] / n:.0%})"
            for step, n in self.replies.items()
        )
        return (
            f"{self.unlabelled} labels the model left out (taken as okay / not_support), {self.echoed} list items "
            f"or lines left out as echoes of the prompt; replies nothing could be read from: {unusable or 'none read'}"
        )

    def _count(self, step: str, echoed: int, usable: bool) -> None:
        self.replies[step] += 1
        if not usable:
            self.unusable[step] += 1
        self.echoed += echoed

    def _without_echo(self, reply: str, template: PromptTemplate, step: str) -> str:
        """A labels reply without its lines that echo the prompt, counted (unusable: no label left)."""
        lines = reply.splitlines()
        kept = [line for line in lines if not echoes(line, self.instructions[template.name])]
        text = "\n".join(kept)
        pattern = _SUPPORT_WORD if step == "assign" else _IMPORTANCE_WORD
        self._count(step, len(lines) - len(kept), bool(pattern.search(text)))
        return text

    @staticmethod
    def _nugget_prompt(
        template: PromptTemplate, query: str, texts: Sequence[str], **values: str
    ) -> list[dict[str, str]]:
        return template.render(
            query=query, nuggets=json.dumps(list(texts), ensure_ascii=False), count=str(len(texts)), **values
        )
