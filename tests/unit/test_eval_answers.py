"""Answer measures against the libraries' own results, groundedness by hand, answers-file validation."""

from __future__ import annotations

import json

import pytest

from cast.core.records import Conversation, Turn
from cast.errors import DataFormatError
from cast.evaluate.answers import (
    ANSWER_MEASURES,
    TEXT_MEASURES,
    TextScorer,
    evaluate_answers,
    groundedness,
    passage_references,
    relevant_passage_ids,
    response_references,
    unigram_f1,
)
from cast.evaluate.wordnet import nltk_data_dir
from cast.formats.answers import read_answers, system_name
from cast.infra.text import words

ANSWER = "The COP26 summit in Glasgow was about climate change; countries promised to cut emissions."
REFERENCE = (
    "COP26 is a United Nations summit about climate change and how countries are planning to tackle it."
)
OTHER = "Glasgow hosted the summit in 2021."

needs_wordnet = pytest.mark.skipif(
    not (nltk_data_dir() / "corpora" / "wordnet" / "lexnames").is_file(),
    reason="WordNet not set up: run scripts/setup_wordnet.sh",
)


@pytest.fixture(scope="module")
def scorer():
    return TextScorer("max")


@needs_wordnet
def test_rouge_is_rouge_score_with_stemming(scorer):
    from rouge_score.rouge_scorer import RougeScorer

    expected = RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True).score(REFERENCE, ANSWER)
    ours = scorer.score(ANSWER, [REFERENCE])
    assert ours["ROUGE-1"] == pytest.approx(100 * expected["rouge1"].fmeasure)
    assert ours["ROUGE-2"] == pytest.approx(100 * expected["rouge2"].fmeasure)
    assert ours["ROUGE-L"] == pytest.approx(100 * expected["rougeL"].fmeasure)


@needs_wordnet
def test_bleu_is_sacrebleu_sentence_bleu(scorer):
    import sacrebleu

    ours = scorer.score(ANSWER, [REFERENCE])
    assert ours["BLEU-4"] == pytest.approx(sacrebleu.sentence_bleu(ANSWER, [REFERENCE]).score)
    # BLEU-1: unigram precision times the brevity penalty (the answer is shorter than the reference).
    bleu1 = sacrebleu.metrics.BLEU(max_ngram_order=1, effective_order=True).sentence_score(
        ANSWER, [REFERENCE]
    )
    assert ours["BLEU-1"] == pytest.approx(bleu1.score)
    assert ours["BLEU-1"] == pytest.approx(bleu1.precisions[0] * bleu1.bp)


@needs_wordnet
def test_meteor_is_nltk_meteor_score(scorer):
    from nltk.translate.meteor_score import meteor_score

    # nltk's own doctest example: 0.6944.
    hypothesis = (
        "It is a guide to action which ensures that the military always obeys the commands of the party"
    )
    reference = "It is a guide to action that ensures that the military will forever heed Party commands"
    assert scorer.score(hypothesis, [reference])["METEOR"] == pytest.approx(69.44, abs=0.01)
    expected = meteor_score([words(REFERENCE)], words(ANSWER))
    assert scorer.score(ANSWER, [REFERENCE])["METEOR"] == pytest.approx(100 * expected)


@needs_wordnet
def test_meteor_uses_wordnet_synonyms(scorer):
    # "motorcar" and "car" share a WordNet synset: a synonym match, not an exact or stem match. (nltk looks
    # synonyms up for the Porter stems left after stem matching, so "automobile" -> "automobil" finds none.)
    synonym = scorer.score("the motorcar", ["the car"])["METEOR"]
    assert synonym == pytest.approx(93.75)  # 2 matches in 1 chunk: F = 1, penalty = 0.5 * (1/2)^3
    assert scorer.score("the banana", ["the car"])["METEOR"] == pytest.approx(25.0)  # F = 0.5, penalty 0.5


@needs_wordnet
def test_multi_reference_max_and_concat(scorer):
    best = scorer.score(ANSWER, [REFERENCE, OTHER])
    for measure in TEXT_MEASURES:
        assert best[measure] == pytest.approx(
            max(scorer.score(ANSWER, [REFERENCE])[measure], scorer.score(ANSWER, [OTHER])[measure])
        )
    concatenated = TextScorer("concat").score(ANSWER, [REFERENCE, OTHER])
    assert concatenated == pytest.approx(scorer.score(ANSWER, [f"{REFERENCE} {OTHER}"]))


def test_unigram_f1_by_hand():
    # overlap {the, cat} = 2; P = 2/3, R = 2/4, F1 = 2PR/(P+R) = 4/7
    assert unigram_f1(["the", "cat", "sat"], ["the", "cat", "is", "black"]) == pytest.approx(4 / 7)
    assert unigram_f1(["a", "a"], ["a"]) == pytest.approx(2 * 0.5 * 1 / 1.5)  # multiset overlap
    assert unigram_f1(["x"], ["y"]) == 0.0


def test_groundedness_by_hand():
    passages = ["COP26 was held in Glasgow. It was about climate change."]
    answer = ["COP26 was held in Glasgow.", "Pigs can fly."]
    grounded, support = groundedness(answer, passages, threshold=0.5)
    assert grounded == 0.5  # the first sentence matches a passage sentence exactly, the second shares nothing
    assert support == pytest.approx(5 / 8)  # 5 of the 8 answer tokens occur in the passage
    assert groundedness([], passages) == (0.0, 0.0)


def _write(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"answer": {"text": "x", "source_ids": []}}, "missing field 'qid'"),
        ({"qid": "1_1"}, "missing field 'answer'"),
        ({"qid": "1_1", "answer": {"source_ids": []}}, "missing field 'answer.text'"),
        ({"qid": "1_1", "answer": {"text": "x"}}, "missing field 'answer.source_ids'"),
        ({"qid": "1_1", "answer": {"text": "x", "source_ids": [3]}}, "answer.source_ids"),
        ("{not json", "not a JSON object"),
        ("[1, 2]", "not a JSON object: found a list"),
    ],
)
def test_answers_file_errors_name_file_and_line(tmp_path, record, message):
    good = {"qid": "1_0", "answer": {"text": "ok", "source_ids": ["p"]}}
    path = _write(tmp_path / "bad.answers.jsonl", [good, record])
    with pytest.raises(DataFormatError, match=message) as info:
        read_answers(path)
    assert info.value.line == 2
    assert str(path) in str(info.value)


def test_answers_file_duplicates_counted_first_kept(tmp_path):
    records = [
        {"qid": "1_1", "answer": {"text": "first", "source_ids": ["p"]}},
        {"qid": "1_1", "answer": {"text": "second", "source_ids": []}},
    ]
    answers = read_answers(_write(tmp_path / "x.answers.jsonl", records))
    assert answers.answers["1_1"].text == "first"
    assert answers.duplicate_qids == ["1_1"]
    assert answers.name == "x"


def test_empty_or_missing_answers_file(tmp_path):
    with pytest.raises(DataFormatError, match="no such answers file"):
        read_answers(tmp_path / "absent.jsonl")
    with pytest.raises(DataFormatError, match="no records"):
        read_answers(_write(tmp_path / "empty.jsonl", []))


def test_references_from_responses_and_qrels():
    turns = (
        Turn(qid="1_1", topic_id="1", turn_id="1", utterance="u", response="R1"),
        Turn(qid="1_2", topic_id="1", turn_id="2", utterance="u"),
    )
    assert response_references([Conversation(topic_id="1", turns=turns)]) == {"1_1": ["R1"]}
    ids = relevant_passage_ids({"1_1": {"a": 4, "b": 2, "c": 3}, "1_2": {"d": 1}}, min_grade=3)
    assert ids == {"1_1": ["a", "c"]}
    references, missing = passage_references(ids, {"a": "text a"})
    assert references == {"1_1": ["text a"]}
    assert missing == ["c"]


def test_system_name():
    assert system_name("runs/eg-g0.25.answers.jsonl") == "eg-g0.25"
    assert system_name("runs/lmd.run") == "lmd"


@needs_wordnet
def test_evaluate_answers_on_fixtures(fixtures, scorer):
    from cast.evaluate.answers import passages_from_collection
    from cast.formats.topics import load_topics

    folder = fixtures / "eval"
    answers = read_answers(folder / "eg-g0.25.answers.jsonl")
    references = response_references(load_topics(folder / "topics.json"))
    texts = passages_from_collection([folder / "collection.jsonl"], ["P1", "P2", "P3"])
    evaluation = evaluate_answers(
        answers, references, scorer=scorer, references_name="responses", passage_texts=texts
    )
    assert list(evaluation.per_turn.columns) == list(ANSWER_MEASURES)
    assert len(evaluation.per_turn) == 3
    # The last answer adds an unsupported sentence ("Pigs can fly over the moon."): half its sentences grounded.
    assert evaluation.per_turn.loc["900_2-1", "grounded"] == pytest.approx(50.0)
    assert evaluation.per_turn.loc["900_1-1", "words"] == len(words(answers.answers["900_1-1"].text))
    without_passages = evaluate_answers(answers, references, scorer=scorer, references_name="responses")
    assert "grounded" not in without_passages.per_turn.columns


@needs_wordnet
def test_unanswered_turns_score_zero_and_are_counted(fixtures, tmp_path, scorer):
    from cast.evaluate.experiment import evaluate_answer_files

    folder = fixtures / "eval"
    records = [json.loads(line) for line in (folder / "eg-g0.25.answers.jsonl").read_text().splitlines()]
    # The first turn is dropped from the file and the second gives no answer: both must score 0, not vanish.
    records[1]["answer"]["no_answer_reason"] = "no passage retrieved"
    skipping = _write(tmp_path / "skipping.answers.jsonl", records[1:])
    evaluations = evaluate_answer_files(
        [folder / "eg-g0.25.answers.jsonl", skipping], topics=folder / "topics.json", progress=False
    )
    full, skipped = evaluations["eg-g0.25"].per_turn, evaluations["skipping"].per_turn
    first, second = records[0]["qid"], records[1]["qid"]
    assert list(skipped.index) == [q for q in full.index if q != first] + [first]
    assert (skipped.loc[[first, second]] == 0).all(axis=None)
    assert full.loc[second, "ROUGE-L"] > 0
    # The same turns are averaged: the skipping system cannot score better by leaving turns out.
    assert skipped["ROUGE-L"].sum() == pytest.approx(
        full["ROUGE-L"].sum() - full.loc[[first, second], "ROUGE-L"].sum()
    )
    assert evaluations["skipping"].mean()["ROUGE-L"] == pytest.approx(skipped["ROUGE-L"].sum() / len(full))
    notes = " ".join(evaluations["skipping"].notes())
    assert "2 turns with references unanswered, scored 0 (1 missing from the file, 1 with no answer" in notes
