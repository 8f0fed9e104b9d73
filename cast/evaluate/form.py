"""A reader's form checks on answers, beside ROUGE and METEOR (which reward filling the word budget and see none of
this): does an answer end on a cut sentence, carry web-page boilerplate, open a sentence on a reference with
nothing before it, or repeat an earlier answer of its conversation?

Per answer, each check is 1 (the fault is there) or 0; over turns, their means are the share of answers at fault.

* ``cut``: a sentence of the answer is not whole (:func:`cast.infra.readable.is_cut`: no final stop, "..." or
  "…", or a lower-case start).
* ``boilerplate``: page furniture, a list number or a heading glued to a sentence
  (:func:`cast.infra.readable.boilerplate_in`, patterns from the collections' real boilerplate).
* ``malformed``: a sentence a reader would not call one (:func:`cast.infra.wellformed.sentence_fault`: a heading or
  label glued to it, a quotation that is no sentence, no verb, text about the page).
* ``dangling``: a sentence leans on what came before it ("His...", "The book...", "Or...", "In my mind, though,
  ..."; :attr:`cast.infra.wellformed.SentenceForm.refers_back`) without the sentence it follows in its passage
  right before it in the answer.
* ``repeat``: at least half of the answer's word pairs (or of the earlier answer's, the shorter of the two) were in
  an earlier answer of the same conversation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cast.core.records import Answer, AnswerSentence
from cast.infra.readable import boilerplate_in, is_cut
from cast.infra.text import repeats, sentences
from cast.infra.wellformed import FormReader, SentenceForm

FORM_CHECKS = ("cut", "boilerplate", "malformed", "dangling", "repeat")
# What may stand between two sentences that follow each other in a passage (white space, a dropped marker).
_ADJACENT_GAP = 40


def answer_sentences(answer: Answer) -> list[AnswerSentence]:
    """The answer's sentences as the generator attributed them, or its text's sentences (unattributed)."""
    return list(answer.sentences) or [AnswerSentence(s, None) for s in sentences(answer.text)]


def follows_in_passage(before: AnswerSentence, after: AnswerSentence, passages: Mapping[str, str]) -> bool:
    """Whether ``after`` comes right after ``before`` in the passage both cite."""
    if before.passage_id is None or before.passage_id != after.passage_id:
        return False
    text = passages.get(before.passage_id)
    if text is None:
        return False
    end = text.find(before.text)
    start = text.find(after.text, max(end, 0))
    return 0 <= end and 0 <= start - (end + len(before.text)) <= _ADJACENT_GAP


def dangling(
    said: Sequence[AnswerSentence], forms: Sequence[SentenceForm], passages: Mapping[str, str]
) -> bool:
    """Whether a sentence of the answer (read as ``forms``) leans on what came before it without the sentence it
    follows in its passage right before it."""
    return any(
        form.refers_back and (number == 0 or not follows_in_passage(said[number - 1], sentence, passages))
        for number, (sentence, form) in enumerate(zip(said, forms, strict=True))
    )


def form_checks(
    answer: Answer,
    earlier: Sequence[Answer],
    passages: Mapping[str, str],
    reader: FormReader | None = None,
) -> dict[str, float]:
    """The checks of one answer (1.0: at fault), given the conversation's earlier answers and the texts of the
    passages it cites (by id); ``reader`` tags the sentences (default: the bundled spaCy tagger). An answer that
    says none was found has no fault of form."""
    if answer.no_answer_reason is not None:
        return dict.fromkeys(FORM_CHECKS, 0.0)
    said = answer_sentences(answer)
    forms = (reader or FormReader()).read([s.text for s in said])
    given = [a.text for a in earlier if a.no_answer_reason is None]
    return {
        "cut": float(any(is_cut(s.text) for s in said)),
        "boilerplate": float(boilerplate_in(answer.text)),
        "malformed": float(any(form.fault is not None for form in forms)),
        "dangling": float(dangling(said, forms, passages)),
        "repeat": float(repeats(answer.text, given)),
    }
