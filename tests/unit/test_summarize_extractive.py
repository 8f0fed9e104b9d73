"""The offline entity-aware extractive summarizer (and the top-k trim baseline) on hand-made passages."""

from __future__ import annotations

import math

import pytest

from cast.core.records import NO_ANSWER_TEXT, Passage, ScoredPassage, Selection
from cast.core.registry import build_stage
from cast.errors import ConfigError
from cast.infra.resources import Resources
from cast.infra.text import count_words, split_sentences
from cast.summarize.entity_extractive import (
    content_terms,
    dense_relevance,
    entity_gain,
    overlap,
    position_prior,
    query_relevance,
    sentence_entities,
    smoothed_idf,
)

OBAMA = "http://dbpedia.org/resource/Barack_Obama"
HAWAII = "http://dbpedia.org/resource/Hawaii"

P1 = (
    "Barack Obama was the 44th president of the United States. He was born in Honolulu, Hawaii in 1961. "
    "The weather in the city was mild that year."
)
P2 = (
    "Hawaii became the 50th state in 1959 after a long campaign. "
    "Barack Obama was the 44th president of the United States. Many tourists visit every winter season."
)


def stage(**settings):
    return build_stage("summarizer", {"name": "entity_extractive", **settings}, Resources({}))


def content_stage(**settings):
    """Whole sentences chosen by their content alone (no position prior, no filling), to test the scores."""
    return stage(fill=False, position_weight=0.0, **settings)


def selection(*texts: str, explanation=None, focus=None) -> Selection:
    passages = tuple(ScoredPassage(Passage(f"p{i + 1}", t), 1.0) for i, t in enumerate(texts))
    return Selection(passages, "eg", explanation=explanation or {}, focus_entity=focus)


def entities_explanation() -> dict:
    return {
        "entity_ranks": {OBAMA: 0.6, HAWAII: 0.3},
        "passage_entities": {
            "p1": [
                {"surface": "Barack Obama", "start": 0, "end": 12, "entity": OBAMA},
                {
                    "surface": "Hawaii",
                    "start": P1.index("Hawaii"),
                    "end": P1.index("Hawaii") + 6,
                    "entity": HAWAII,
                },
            ],
            "p2": [{"surface": "Hawaii", "start": 0, "end": 6, "entity": HAWAII}],
        },
    }


def test_every_sentence_comes_from_the_passage_it_is_attributed_to():
    answer = stage(words=40, fill=True).summarize(
        "where was obama born", selection(P1, P2, explanation=entities_explanation())
    )
    passages = {"p1": P1, "p2": P2}
    *whole, last = answer.sentences
    assert whole
    for sentence in whole:
        assert sentence.text in [s.text for s in split_sentences(passages[sentence.passage_id])]
    # The last one fills the budget: the start of a sentence of its passage, marked as cut.
    assert last.text.endswith("…")
    assert any(s.text.startswith(last.text[:-1]) for s in split_sentences(passages[last.passage_id]))
    assert answer.text == " ".join(s.text for s in answer.sentences)
    assert answer.source_ids == ("p1", "p2")
    assert answer.generator == "entity_extractive"
    assert answer.settings["words"] == 40


@pytest.mark.parametrize("fill", [True, False])
@pytest.mark.parametrize("words", [8, 15, 25, 40, 200])
def test_the_answer_keeps_to_the_word_budget_and_repeats_no_sentence(words, fill):
    answer = stage(words=words, fill=fill).summarize(
        "obama president", selection(P1, P2, explanation=entities_explanation())
    )
    # The sentence found in both passages counts once.
    available = count_words(P1) + count_words(P2) - count_words(split_sentences(P2)[1].text)
    assert 1 <= count_words(answer.text) <= words
    if fill:
        assert count_words(answer.text) == min(words, available)
    texts = [s.text for s in answer.sentences]
    assert len(texts) == len(set(texts))


def test_a_sentence_with_the_query_terms_and_the_top_entities_comes_first():
    answer = content_stage(words=12).summarize(
        "where was obama born", selection(P2, P1, explanation=entities_explanation())
    )
    assert [s.text for s in answer.sentences] == ["Barack Obama was the 44th president of the United States."]
    # "He was born ..." opens on a reference: it comes only right after the sentence it refers to.
    both = content_stage(words=20).summarize(
        "where was he born", selection(P1, explanation=entities_explanation())
    )
    assert [s.text for s in both.sentences] == split_sentences(P1)[:2] or [
        s.text for s in both.sentences
    ] == [s.text for s in split_sentences(P1)[:2]]


def test_the_position_prior_prefers_the_lead_sentence_of_the_best_passage():
    lead = stage(words=12, fill=False, position_weight=1.0).summarize(
        "where was he born", selection(P1, P2, explanation=entities_explanation())
    )
    assert [s.text for s in lead.sentences] == ["Barack Obama was the 44th president of the United States."]
    assert position_prior(0, 0) == 1.0
    assert position_prior(1, 2) == pytest.approx(1 / 6)


def test_entity_coverage_decides_between_sentences_the_query_does_not_separate():
    texts = ("The island has a famous volcano today.", "Barack Obama grew up on an island long ago.")
    explanation = {
        "entity_ranks": {OBAMA: 1.0},
        "passage_entities": {"p2": [{"surface": "Barack Obama", "entity": OBAMA}]},
    }
    with_entities = content_stage(words=9).summarize("island", selection(*texts, explanation=explanation))
    without = content_stage(words=9).summarize("island", selection(*texts))
    assert [s.passage_id for s in with_entities.sentences] == ["p2"]
    assert [s.passage_id for s in without.sentences] == ["p1"]
    # Without entity ranks, the selection's focus entity stands for them.
    focus_only = {"passage_entities": explanation["passage_entities"]}
    focused = content_stage(words=9).summarize(
        "island", selection(*texts, explanation=focus_only, focus=OBAMA)
    )
    assert [s.passage_id for s in focused.sentences] == ["p2"]


def test_a_near_duplicate_loses_to_a_new_sentence():
    texts = (
        "The garage door opener stopped working after the storm.",
        "The garage door opener stopped working after the big storm.",
        "A new remote fixes most garage door problems.",
    )
    answer = content_stage(words=20, novelty_weight=0.5).summarize(
        "garage door opener stopped working", selection(*texts)
    )
    assert [s.passage_id for s in answer.sentences] == ["p1", "p3"]


def test_sentences_are_read_in_passage_order():
    answer = stage(words=200).summarize("obama", selection(P1, P2))
    orders = [
        (s.passage_id, P1.find(s.text) if s.passage_id == "p1" else P2.find(s.text)) for s in answer.sentences
    ]
    assert orders == sorted(orders)


def test_the_answer_is_never_empty():
    long_sentence = " ".join(f"word{i}" for i in range(30)) + "."
    whole = stage(words=10).summarize("word3", selection(long_sentence))
    assert whole.text == long_sentence  # the only sentence, longer than the budget: whole, not cut
    cut = stage(words=10, fill=True).summarize("word3", selection(long_sentence))
    assert cut.text == " ".join(f"word{i}" for i in range(10)) + "…"
    assert cut.sentences[0].passage_id == "p1"
    fragments = stage(words=10).summarize("q", selection("Yes. No."))
    assert fragments.text == "Yes. No."
    for empty in (selection(), selection("  ", "")):
        answer = stage().summarize("q", empty)
        assert answer.text == NO_ANSWER_TEXT
        assert answer.no_answer_reason


def test_mentions_are_placed_by_offsets_or_else_by_their_surface_form():
    text = "Obama spoke. Hawaii listened."
    good = {"surface": "Hawaii", "start": 13, "end": 19, "entity": HAWAII}
    stale = {"surface": "Obama", "start": 40, "end": 45, "entity": OBAMA}
    assert sentence_entities(text, 0, 12, [good, stale]) == {OBAMA}
    assert sentence_entities(text, 13, 29, [good, stale]) == {HAWAII}


def test_scoring_functions_on_hand_computed_examples():
    assert content_terms("Where was Obama born, in Hawaii?") == ["obama", "born", "hawaii"]
    idf = smoothed_idf([frozenset({"a", "b"}), frozenset({"b"})])
    assert idf == pytest.approx({"a": math.log(3.0), "b": math.log(2.0)})
    assert query_relevance(["a", "b", "a"], frozenset({"a"}), idf) == pytest.approx(math.log(3) / math.log(6))
    assert query_relevance([], frozenset({"a"}), idf) == 0.0
    assert overlap(frozenset({"a", "b"}), frozenset({"b", "c"})) == pytest.approx(1 / 3)
    assert overlap(frozenset(), frozenset()) == 0.0
    assert entity_gain(frozenset({"x", "y"}), {"y"}, {"x": 0.5, "y": 0.4}) == 0.5


def test_dense_relevance_on_hand_computed_vectors():
    import numpy as np

    sentences = np.array([[1.0, 0.0], [0.6, 0.8], [-1.0, 0.0]])
    assert dense_relevance(np.array([0.6, 0.8]), sentences) == pytest.approx([0.6, 1.0, 0.0])


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="words"):
        stage(words=0)
    with pytest.raises(ConfigError, match="entity_weight"):
        stage(entity_weight=1.5)
    with pytest.raises(ConfigError, match="position_weight"):
        stage(position_weight=-0.1)
    with pytest.raises(ConfigError, match="relevance must be one of overlap, dense"):
        stage(relevance="bm25")


def test_top_k_trim_keeps_the_first_words_in_passage_order():
    baseline = build_stage("summarizer", {"name": "topk_trim", "words": 12}, Resources({}))
    answer = baseline.summarize("q", selection("one two three four five", "", P1))
    assert count_words(answer.text) == 12
    assert [s.passage_id for s in answer.sentences] == ["p1", "p3"]
    assert baseline.summarize("q", selection()).no_answer_reason == "no passages were selected"


def test_answers_are_whole_clean_sentences_within_the_budget():
    kilt = "Section::::Early life. " + P1 + " The average price comes in just under $27,000 while"
    for words in (8, 15, 25, 40, 200):
        answer = stage(words=words).summarize("obama president", selection(kilt, P2))
        assert count_words(answer.text) <= max(words, 11)  # 11: the longest sentence, alone where none fits
        for sentence in answer.sentences:
            assert sentence.text in [s.text for s in split_sentences(P1 + " " + P2)]


def test_the_featured_snippet_leads_with_the_best_sentence_and_what_it_needs():
    texts = (
        "Hawaii became the 50th state in 1959 after a long campaign. Many tourists visit every winter season.",
        P1,
    )
    answer = content_stage(words=40, lead_sentences=2, add_share=0.5).summarize(
        "where was he born", selection(*texts, explanation=entities_explanation())
    )
    # The best sentence opens on "He": the sentence before it in its passage comes first, then nothing unrelated.
    assert [s.text for s in answer.sentences][:2] == [s.text for s in split_sentences(P1)[:2]]
    assert "Many tourists" not in answer.text


def test_a_sentence_that_announces_what_follows_comes_only_with_it():
    tips = "Here are some tips to sleep better. Keep the bedroom dark and cool. Sleep tips vary from person to person."
    other = "Tips on sleep: a regular bedtime helps most people sleep better."
    answer = content_stage(words=40, lead_sentences=1).summarize(
        "tips to sleep better", selection(tips, other)
    )
    said = [s.text for s in answer.sentences]
    assert said[:2] == ["Here are some tips to sleep better.", "Keep the bedroom dark and cool."]
    # At the end of its passage, with nothing after it, it is left out.
    alone = content_stage(words=40, lead_sentences=1).summarize(
        "tips to sleep better", selection("Sleep is rest. Here are some tips to sleep better.", other)
    )
    assert "Here are" not in alone.text and alone.sentences


def test_a_sentence_holds_its_page_titles_words():
    # "The element" in the page "Polonium" is polonium: with the title's words, its sentence answers the question.
    pages = (
        Passage("p1", "The curie unit is named in honour of Marie Curie.", title="Curie (unit)"),
        Passage("p2", "Curie hoped the name of the element would publicize Poland.", title="Polonium"),
        Passage("p3", "Marie Curie was born in Warsaw in 1867.", title="Marie Curie"),
    )
    chosen = Selection(tuple(ScoredPassage(p, 1.0) for p in pages), "eg")
    question = "Why did Marie Curie name polonium that way?"
    plain = content_stage(words=12, entity_weight=0.0).summarize(question, chosen)
    titled = content_stage(words=12, entity_weight=0.0, title_words=True).summarize(question, chosen)
    assert plain.text.startswith("The curie unit") and titled.text.startswith("Curie hoped")


def test_a_page_topic_is_an_encyclopedia_title_not_a_headline():
    from cast.summarize.entity_extractive import page_topic

    assert page_topic("Paul Kelly (Australian musician)") == "Paul Kelly"
    assert page_topic("Polonium") == "Polonium"
    for headline in (
        "The Best Strength Exercises for Runners | Strength Running",
        "Climate Change: What is COP26, and why is it happening in Glasgow in 2021? - CBBC Newsround",
        "How to Make Mother's Day Gift Baskets and Other Homemade Gifts",
        None,
    ):
        assert page_topic(headline) == ""


def test_no_sentence_an_earlier_answer_gave():
    earlier = ["Barack Obama was the 44th president of the United States."]
    answer = content_stage(words=12, lead_sentences=2).summarize(
        "obama president", selection(P1, P2), earlier=earlier
    )
    assert "44th president" not in answer.text
    # Where every sentence was said before, the answer says that nothing new was found rather than repeat it.
    alone = content_stage(words=12).summarize("obama", selection(earlier[0]), earlier=earlier)
    assert alone.no_answer_reason == "every sentence of the selected passages was in an earlier answer"


def test_no_sentence_that_repeats_most_word_pairs_of_an_earlier_answer():
    # The same page template on another page: few content words differ, most word pairs are the same.
    earlier = ["Featured hotels near the Vatican: see the latest prices and deals by choosing your dates."]
    template = (
        "Featured hotels near St Peter's Square: see the latest prices and deals by choosing your dates."
    )
    answer = content_stage(words=40).summarize(
        "hotels in rome", selection(template + " " + P1), earlier=earlier
    )
    assert "latest prices" not in answer.text and answer.no_answer_reason is None


def test_the_question_names_the_salient_entity_and_asks_for_a_kind_of_answer():
    from cast.summarize.entity_extractive import question_referent
    from cast.summarize.question import answer_kind, fits_kind, natural_question

    explanation = {**entities_explanation(), "query_entities": [HAWAII, OBAMA]}
    assert question_referent("When was he born?", selection(P1, explanation=explanation)).entity == OBAMA
    assert natural_question("When was he born?", "Barack Obama") == "When was Barack Obama born?"
    assert natural_question("When was Obama born?", "Obama") == "When was Obama born?"
    assert answer_kind("When was he born?") == "date" and fits_kind(
        "date", "He was born in Honolulu in 1961."
    )
    assert answer_kind("Why is the sky blue?") == "cause" and not fits_kind("cause", "The sky is blue.")
    texts = ("Hawaii is a state of the United States of America.", "Hawaii joined the union in 1959.")
    question = "when did hawaii become a united states state"
    plain = content_stage(words=10, entity_weight=0.0).summarize(question, selection(*texts))
    dated = content_stage(words=10, entity_weight=0.0, kind_weight=0.5).summarize(question, selection(*texts))
    assert "1959" not in plain.text and "1959" in dated.text


def test_a_gendered_pronoun_refers_to_an_entity_of_its_gender():
    from cast.summarize.question import antecedent, entity_genders, natural_question

    text = (
        "Marie Curie was a physicist. On 19 April 1906, Pierre was killed in a road accident. Walking in the rain, "
        "he fell under a cart. Curie was devastated by her husband's death."
    )
    mentions = [(0, "Marie"), (text.index("Pierre"), "Pierre"), (text.index("Curie was dev"), "Marie")]
    genders = entity_genders([(text, mentions)])
    assert genders == {"Pierre": "male", "Marie": "female"}
    # "he" after a conversation about Marie Curie: her husband, not her; "she": her, queried first.
    assert antecedent("How did he die?", ["Marie"], ["Marie", "Physics", "Pierre"], genders) == "Pierre"
    assert antecedent("How did she die?", ["Marie"], ["Pierre", "Marie"], genders) == "Marie"
    # A queried entity of unknown gender may still be "she"; one of the other gender never.
    assert antecedent("Where was she born?", ["Warsaw"], [], genders) == "Warsaw"
    assert antecedent("Where was he born?", ["Marie"], ["Physics"], genders) is None
    # "it" is no person; "they" is the first queried entity.
    assert antecedent("What is it?", ["Marie", "Radium"], [], genders) == "Radium"
    assert antecedent("What did they find?", ["Marie", "Radium"], [], genders) == "Marie"
    # An object pronoun does not refer to its own sentence's subject: "him" is Pierre, not the Marie before it.
    assert entity_genders(
        [("Pierre met Marie. Marie married him.", [(0, "Pierre"), (11, "Marie"), (18, "Marie")])]
    ) == {"Pierre": "male"}
    assert natural_question("Who was her husband?", "Marie Curie") == "Who was Marie Curie's husband?"
    assert natural_question("Who married her in 1895?", "Marie Curie") == "Who married Marie Curie in 1895?"


def test_the_question_is_resolved_with_the_entity_its_pronoun_agrees_with():
    from cast.summarize.entity_extractive import question_referent

    marie, pierre = "http://dbpedia.org/resource/Marie_Curie", "http://dbpedia.org/resource/Pierre_Curie"
    text = (
        "On 19 April 1906, Pierre Curie was killed in a road accident. Walking in the rain, he fell under a cart. "
        "Curie was devastated by her husband's death. She accepted the chair."
    )
    explanation = {
        "query_entities": [marie],
        "entity_ranks": {marie: 0.5, pierre: 0.3},
        # Marie Curie is not linked in the passage: her surname names her.
        "passage_entities": {"p1": [{"surface": "Pierre Curie", "start": 18, "end": 30, "entity": pierre}]},
    }
    chosen = selection(text, explanation=explanation)
    assert question_referent("How did he die?", chosen).entity == pierre
    assert question_referent("How did she die?", chosen).entity == marie


def test_words_match_by_their_stems_and_a_death_question_asks_for_a_death():
    from cast.summarize.entity_extractive import word_stems
    from cast.summarize.question import answer_kind, fits_kind

    assert word_stems(["died", "curie's", "discovered"]) == word_stems(["die", "curie", "discover"])
    assert answer_kind("How did he die?") == "death" and fits_kind(
        "death", "Pierre was killed in an accident."
    )
    assert not fits_kind("death", "Pierre was a physicist.")
    texts = (
        "Curie visited Poland in 1934. The curie unit is named after Marie Curie.",
        "Curie died of anemia.",
    )
    question = "How did Marie Curie die?"
    plain = content_stage(words=8, entity_weight=0.0).summarize(question, selection(*texts))
    cued = content_stage(words=8, entity_weight=0.0, kind_weight=0.5).summarize(question, selection(*texts))
    assert plain.text != cued.text == "Curie died of anemia."


def test_a_sentence_opening_on_the_questions_referent_answers_on_its_own():
    marie = "http://dbpedia.org/resource/Marie_Curie"
    element = "http://dbpedia.org/resource/Chemical_element"
    text = (
        "While a French citizen, Marie Curie never lost her sense of Polish identity. She taught her daughters "
        "the Polish language. She named the first chemical element that she discovered polonium, after her "
        "native country."
    )
    explanation = {
        # A concept the pronoun rule of thumb may give a gender rivals no person.
        "query_entities": [marie, element],
        "entity_ranks": {marie: 0.5, element: 0.3},
        "passage_entities": {"p1": [{"surface": "Marie Curie", "start": 24, "end": 35, "entity": marie}]},
    }
    question = "Which chemical elements did she discover?"
    resolving = content_stage(words=25, lead_sentences=3, resolve_question=True)
    as_said = content_stage(words=25, lead_sentences=3)
    answer = resolving.summarize(question, selection(text, explanation=explanation))
    assert answer.text.startswith("She named the first chemical element")
    # Unresolved, "She named ..." needs the sentences before it, back to the one naming her.
    assert as_said.summarize(question, selection(text, explanation=explanation)).text.startswith("While")
    # Where the passage names another woman of the conversation, "She" may be her: read after its antecedent.
    rival = "http://dbpedia.org/resource/Irene_Joliot-Curie"
    other = text.replace("She taught", "Irene Joliot-Curie taught her daughters. She taught")
    mentions = [
        {"surface": "Marie Curie", "start": 24, "end": 35, "entity": marie},
        {
            "surface": "Irene Joliot-Curie",
            "start": other.index("Irene"),
            "end": other.index("Irene") + 18,
            "entity": rival,
        },
    ]
    crowded = {**explanation, "query_entities": [marie, rival], "passage_entities": {"p1": mentions}}
    crowded["entity_ranks"] = {marie: 0.5, rival: 0.4}
    answer = resolving.summarize(question, selection(other, explanation=crowded))
    assert not answer.text.startswith("She named")


def test_a_definition_is_told_by_its_verb_past_the_dates_in_parentheses():
    from cast.summarize.question import fits_kind

    assert fits_kind("definition", "Marie Curie (7 November 1867 – 4 July 1934) was a Polish physicist.")
    assert fits_kind("definition", "Lyme disease, also known as Lyme borreliosis, is an infectious disease.")
    assert not fits_kind("definition", "Marie Curie, who moved to Paris, married Pierre in 1895.")
    assert not fits_kind("definition", "What Is a Vegan Keto Diet?")
