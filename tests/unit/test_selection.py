"""Passage selectors O / ER / EG with EP, the combination with relevance and ED, on hand-computed turns."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cast.core.records import EntityMention, Passage, ScoredPassage, to_dict
from cast.core.registry import build_stage
from cast.core.stages import KnowledgeBase, SelectionInput
from cast.entity.select.selection import (
    EntityGraphSelector,
    EntityRelatednessSelector,
    OriginalOrderSelector,
    asked_definition,
    combine_scores,
    filter_sentences,
)
from cast.errors import CastError, ConfigError
from cast.infra.resources import Resources


class TableKnowledgeBase(KnowledgeBase):
    """A knowledge base with a fixed, symmetric relatedness table (1 for the same entity, 0 when absent)."""

    def __init__(self, table: dict[tuple[str, str], float]):
        self.table = table
        self.calls = 0

    def relatedness(self, a: str, b: str) -> float:
        self.calls += 1
        if a == b:
            return 1.0
        return self.table.get((a, b), self.table.get((b, a), 0.0))


class FakeResources:
    """Just what ER asks of the pipeline's resources: its knowledge base."""

    def __init__(self, knowledge_base: KnowledgeBase):
        self.knowledge_base = knowledge_base
        self.config = {"knowledge_base": {"name": "fake"}}

    def shared(self, key: object, build: object) -> KnowledgeBase:
        assert key == ("stage", "knowledge_base")
        return self.knowledge_base


def mention(entity: str, start: int = 0, surface: str | None = None) -> EntityMention:
    surface = surface or entity
    return EntityMention(surface, start, start + len(surface), entity, 0.9, "test")


def candidate(pid: str, score: float, text: str = "text.") -> ScoredPassage:
    return ScoredPassage(Passage(pid, text, title=pid.upper()), score)


def turn(passage_entities, query=(), history=(), focus=None, scores=None) -> SelectionInput:
    scores = scores or [1.0 - 0.1 * k for k in range(len(passage_entities))]
    return SelectionInput(
        query="q",
        candidates=tuple(candidate(f"p{k}", s) for k, s in enumerate(scores)),
        query_entities=tuple(mention(e) for e in query),
        history_entities=tuple(mention(e) for e in history),
        passage_entities=tuple(tuple(mention(e) for e in ents) for ents in passage_entities),
        previous_focus_entity=focus,
    )


def ids(selection) -> list[str]:
    return [p.id for p in selection.passages]


# --- O ---------------------------------------------------------------------------------------------------------


def test_original_order_keeps_the_rerankers_top_n_and_scores():
    inputs = SelectionInput(query="q", candidates=tuple(candidate(f"p{k}", 1.0 - 0.1 * k) for k in range(5)))
    selection = OriginalOrderSelector(n=3).select(inputs)
    assert ids(selection) == ["p0", "p1", "p2"]
    assert selection.scores["p4"] == pytest.approx(0.6)
    assert selection.focus_entity is None
    assert not OriginalOrderSelector().needs_entities


def test_original_order_needs_entities_only_with_path_bonus_or_density_filter():
    assert OriginalOrderSelector(path_bonus=0.5).needs_entities
    assert OriginalOrderSelector(density_filter=True).needs_entities


# --- ER --------------------------------------------------------------------------------------------------------

ER_TABLE = {("x", "q1"): 0.2, ("x", "q2"): 0.4, ("y", "q1"): 0.6, ("y", "q2"): 0.0, ("q1", "q2"): 0.5}


def er_selector(**settings) -> EntityRelatednessSelector:
    settings.setdefault("combine", "reorder")  # the final score is then the entity score, computed by hand
    return EntityRelatednessSelector(resources=FakeResources(TableKnowledgeBase(ER_TABLE)), **settings)


def test_er_scores_by_hand_with_history_entities():
    # E_q = {q1 (current), q2 (earlier turn)}; p0 = (.2+.4+.6+0)/4 = .3, p1 = (1+.5)/2 = .75, p2 = 0
    inputs = turn([["x", "y", "x"], ["q1"], []], query=["q1"], history=["q2"])
    selection = er_selector(n=2).select(inputs)
    assert ids(selection) == ["p1", "p0"]
    assert selection.scores == pytest.approx({"p0": 0.3, "p1": 0.75, "p2": 0.0})
    assert selection.explanation["query_entities"] == ["q1", "q2"]
    # an entity's rank is its mean relatedness to E_q; q1 ties q2 at .75 and wins by name
    assert selection.explanation["entity_ranks"]["y"] == pytest.approx(0.3)
    assert selection.focus_entity == "q1"


def test_er_without_history_uses_the_current_query_only():
    # E_q = {q1}: p0 = (.2 + .6)/2 = .4, p1 = 1
    selection = er_selector(history=False).select(
        turn([["x", "y"], ["q1"], []], query=["q1"], history=["q2"])
    )
    assert selection.scores == pytest.approx({"p0": 0.4, "p1": 1.0, "p2": 0.0})


def test_er_falls_back_to_original_order_without_query_entities():
    selection = er_selector(n=2).select(turn([["x"], ["y"], ["q1"]]))
    assert ids(selection) == ["p0", "p1"]
    assert selection.explanation["fallback"].startswith("no query entities")


def test_er_asks_the_knowledge_base_for_the_turns_entities_only():
    knowledge_base = TableKnowledgeBase(ER_TABLE)
    EntityRelatednessSelector(resources=FakeResources(knowledge_base)).select(
        turn([["x"], ["x", "y"]], query=["q1"])
    )
    assert knowledge_base.calls == 3  # {q1, x, y} x {q1}


# --- EG --------------------------------------------------------------------------------------------------------


def test_eg_by_hand():
    # Query entities {a, b}; p0 = {a, c}, p1 = {c}, p2 = {}. gamma = .5: GraphE has a-b .25, a-c .25, b-c 0,
    # so the graph is the path b - a - c; PageRank (alpha .5): a = 8/18, b = c = 5/18.
    inputs = turn([["a", "c"], ["c"], []], query=["a", "b"], scores=[0.1, 0.9, 0.5])
    selection = EntityGraphSelector(combine="reorder", n=2, gamma=0.5, alpha=0.5).select(inputs)
    assert selection.scores == pytest.approx({"p0": 13 / 18, "p1": 5 / 18, "p2": 0.0}, abs=1e-7)
    assert ids(selection) == ["p0", "p1"]
    assert (selection.method, selection.focus_entity) == ("eg", "a")
    explanation = selection.explanation
    assert explanation["entity_ranks"] == pytest.approx({"a": 8 / 18, "b": 5 / 18, "c": 5 / 18}, abs=1e-6)
    assert sorted(map(tuple, explanation["edges"])) == [("a", "b", 0.25), ("a", "c", 0.25)]
    assert explanation["chosen"] == ["p0", "p1"]
    assert explanation["passage_entities"]["p1"] == [{"surface": "c", "start": 0, "end": 1, "entity": "c"}]
    assert [c["chosen"] for c in explanation["candidates"]] == [True, True, False]
    assert explanation["candidates"][1]["relevance"] == 0.9


def test_eg_mean_aggregate():
    inputs = turn([["a", "c"], ["c"], []], query=["a", "b"])
    selection = EntityGraphSelector(combine="reorder", gamma=0.5, alpha=0.5, aggregate="mean").select(inputs)
    assert selection.scores == pytest.approx({"p0": 13 / 36, "p1": 5 / 18, "p2": 0.0}, abs=1e-7)


def test_eg_ties_are_broken_by_relevance():
    # p0 and p1 hold the same entities, so they score the same; p1 is more relevant
    inputs = turn([["a", "b"], ["b", "a"], ["c"]], query=["a"], scores=[0.2, 0.8, 0.5])
    assert ids(EntityGraphSelector(combine="reorder", n=2).select(inputs)) == ["p1", "p0"]


def test_eg_without_any_entities_keeps_the_rerankers_order():
    selection = EntityGraphSelector(n=2).select(turn([[], [], []], scores=[0.3, 0.9, 0.5]))
    assert ids(selection) == ["p1", "p2"]
    assert selection.focus_entity is None
    assert selection.explanation["edges"] == [] and selection.explanation["entity_ranks"] == {}


def test_eg_with_every_weight_below_threshold_ranks_entities_uniformly():
    # no edge survives: PageRank is uniform (1/4), a passage scores 1/4 per entity
    inputs = turn([["a"], ["b", "c", "d"], ["c"]], query=["a"])
    selection = EntityGraphSelector(combine="reorder", threshold=5.0).select(inputs)
    assert selection.explanation["edges"] == []
    assert selection.scores == pytest.approx({"p0": 0.25, "p1": 0.75, "p2": 0.25})
    assert ids(selection) == ["p1", "p0", "p2"]


def test_eg_on_a_disconnected_graph_and_a_single_passage():
    inputs = turn([["a", "b"], ["c", "d"]], query=["a"])
    selection = EntityGraphSelector(combine="reorder", n=1, gamma=0.0).select(inputs)
    assert sorted(map(tuple, selection.explanation["edges"])) == [("a", "b", 1.0), ("c", "d", 1.0)]
    assert selection.scores["p0"] == pytest.approx(selection.scores["p1"])  # two identical components
    assert ids(selection) == ["p0"]
    single = EntityGraphSelector(n=1, candidates=1).select(turn([["a"]], query=["a"]))
    assert ids(single) == ["p0"] and single.focus_entity == "a"


def test_eg_considers_only_the_top_candidates():
    inputs = turn([["x"], ["a"], ["a", "b", "c"]], query=["a"])
    selection = EntityGraphSelector(candidates=2, n=2).select(inputs)
    assert set(selection.scores) == {"p0", "p1"}


# --- EP --------------------------------------------------------------------------------------------------------


def test_entity_path_bonus_by_hand():
    # gamma 0: edges a-b (p0), b-c (p1); d alone (p2); focus a. Distances: p0 0, p1 1, p2 unreachable.
    inputs = turn([["b", "a"], ["c", "b"], ["d"], ["e"]], focus="a", scores=[0.1, 0.2, 0.9, 0.8])
    selection = OriginalOrderSelector(combine="reorder", n=4, gamma=0.0, path_bonus=0.6).select(inputs)
    assert selection.scores == pytest.approx({"p0": 0.6, "p1": 0.3, "p2": 0.0, "p3": 0.0})
    assert ids(selection) == ["p0", "p1", "p2", "p3"]
    assert selection.explanation["path"] == {
        "focus": "a",
        "chains": {"p0": ["a"], "p1": ["a", "b"], "p2": None, "p3": None},
    }
    # O ranks no entities itself: the next turn's focus is the PageRank winner of the graph, b (the middle)
    assert selection.focus_entity == "b"


def test_entity_path_with_an_unknown_focus_gives_no_bonus():
    inputs = turn([["a"], ["b"]], focus="zzz", scores=[0.1, 0.9])
    selection = OriginalOrderSelector(combine="reorder", n=1, path_bonus=1.0).select(inputs)
    assert ids(selection) == ["p1"]
    assert selection.explanation["path"]["chains"] == {"p0": None, "p1": None}


def test_entity_path_adds_to_the_entity_graph_score():
    inputs = turn([["a", "c"], ["c"], []], query=["a", "b"], focus="c")
    plain = EntityGraphSelector(combine="reorder", gamma=0.5, alpha=0.5).select(inputs)
    with_path = EntityGraphSelector(combine="reorder", gamma=0.5, alpha=0.5, path_bonus=1.0).select(inputs)
    assert with_path.scores["p1"] == pytest.approx(plain.scores["p1"] + 1.0)
    assert with_path.scores["p0"] == pytest.approx(plain.scores["p0"] + 1.0)
    assert with_path.scores["p2"] == 0.0


def test_er_with_entity_path():
    inputs = turn([["x"], ["y"]], query=["q1"], focus="y")
    selection = er_selector(gamma=0.0, path_bonus=1.0).select(inputs)
    assert selection.scores == pytest.approx({"p0": 0.2, "p1": 1.6})


# --- combination with relevance --------------------------------------------------------------------------------


def test_combine_reorder_and_interpolate():
    relevance = np.array([3.0, 1.0, 2.0])
    entity = np.array([0.0, 1.0, 1.0])
    final, order = combine_scores(relevance, entity, "reorder", 0.5)
    assert order == [2, 1, 0]
    np.testing.assert_allclose(final, entity)
    # relevance normalised [1, 0, .5], entity [0, 1, 1]: .7 * rel + .3 * ent = [.7, .3, .65]
    final, order = combine_scores(relevance, entity, "interpolate", 0.7)
    np.testing.assert_allclose(final, [0.7, 0.3, 0.65])
    assert order == [0, 2, 1]


def test_default_combination_interpolates_half_relevance_half_entity_score():
    # EG scores (gamma .5, alpha .5) 13/18, 5/18, 0 -> normalised 1, 5/13, 0; relevance .1, .9, .5 -> 0, 1, .5
    inputs = turn([["a", "c"], ["c"], []], query=["a", "b"], scores=[0.1, 0.9, 0.5])
    selection = EntityGraphSelector(n=2, gamma=0.5, alpha=0.5).select(inputs)
    assert selection.scores == pytest.approx({"p0": 0.5, "p1": 0.5 + 2.5 / 13, "p2": 0.25}, abs=1e-6)
    assert ids(selection) == ["p1", "p0"]


def test_interpolation_in_a_selector():
    inputs = turn([["a", "b"], ["c"], ["a"]], query=["a"], scores=[0.1, 0.9, 0.5])
    assert ids(EntityGraphSelector(n=1, combine="interpolate", weight=1.0).select(inputs)) == ["p1"]
    assert ids(EntityGraphSelector(n=1, combine="interpolate", weight=0.0).select(inputs)) == ["p0"]


def test_passage_order_relevance_hands_on_the_chosen_set_in_rerankers_order():
    inputs = turn([["a", "b"], ["c"], ["a"]], query=["a"], scores=[0.1, 0.9, 0.5])
    by_score = EntityGraphSelector(combine="reorder", n=2).select(inputs)
    by_relevance = EntityGraphSelector(combine="reorder", n=2, passage_order="relevance").select(inputs)
    assert ids(by_score) == ["p0", "p2"]
    assert ids(by_relevance) == ["p2", "p0"]
    assert by_relevance.scores == by_score.scores


# --- ED --------------------------------------------------------------------------------------------------------

TEXT = "Obama was president. It rained a lot. Paris is big and old."


def test_filter_sentences_drops_sentences_without_entities_and_shifts_mentions():
    mentions = (mention("Obama", 0), mention("Paris", 38))
    assert TEXT[38:43] == "Paris"
    text, shifted, kept, dropped = filter_sentences(TEXT, mentions, 0.0)
    assert text == "Obama was president. Paris is big and old."
    assert (kept, dropped) == (2, 1)
    assert [text[m.start : m.end] for m in shifted] == ["Obama", "Paris"]
    # density: "Paris is big and old." has 1 mention in 5 words (.2); "Obama was president." 1 in 3
    text, _, kept, dropped = filter_sentences(TEXT, mentions, 0.25)
    assert text == "Obama was president." and (kept, dropped) == (1, 2)


def test_density_filter_in_a_selector_keeps_ids_and_titles():
    inputs = SelectionInput(
        query="q",
        candidates=(candidate("p0", 0.9, TEXT), candidate("p1", 0.5, "Nothing here. At all.")),
        passage_entities=((mention("Obama", 0), mention("Paris", 38)), ()),
    )
    selection = OriginalOrderSelector(n=2, density_filter=True).select(inputs)
    first, second = selection.passages
    assert (first.id, first.passage.title) == ("p0", "P0")
    assert first.passage.text == "Obama was president. Paris is big and old."
    assert second.passage.text == "Nothing here. At all."  # no sentence passes: kept whole, and said so
    report = selection.explanation["density_filter"]
    assert report["p0"] == {"kept": 2, "dropped": 1}
    assert report["p1"]["kept"].startswith("all")
    spans = selection.explanation["passage_entities"]["p0"]
    assert [first.passage.text[m["start"] : m["end"]] for m in spans] == ["Obama", "Paris"]


# --- config and contract ----------------------------------------------------------------------------------------


def test_selectors_build_from_config_and_reject_bad_settings():
    resources = Resources({"knowledge_base": {"name": "collection"}})
    selector = build_stage("selector", {"name": "eg", "gamma": 0.5, "path_bonus": 0.2}, resources)
    assert isinstance(selector, EntityGraphSelector) and selector.needs_entities
    assert selector.describe()["gamma"] == 0.5
    with pytest.raises(ConfigError, match="unknown setting"):
        build_stage("selector", {"name": "eg", "gama": 0.5}, resources)
    with pytest.raises(ConfigError, match="combine"):
        build_stage("selector", {"name": "o", "combine": "mix"}, resources)
    with pytest.raises(ConfigError, match="gamma"):
        EntityGraphSelector(gamma=1.5)
    with pytest.raises(ConfigError, match="n <= candidates"):
        OriginalOrderSelector(candidates=2, n=3)


def test_missing_passage_entities_is_an_error():
    inputs = SelectionInput(query="q", candidates=(candidate("p0", 1.0),))
    with pytest.raises(CastError, match="entity-linked"):
        EntityGraphSelector().select(inputs)


def test_selection_is_json_serialisable():
    inputs = turn([["a", "c"], ["c"], []], query=["a", "b"], focus="c")
    selection = EntityGraphSelector(path_bonus=0.5, density_filter=True).select(inputs)
    assert json.loads(json.dumps(to_dict(selection)))["explanation"]["path"]["focus"] == "c"


def test_a_question_asking_who_an_entity_is_reads_the_passage_that_defines_it():
    curie = "http://dbpedia.org/resource/Marie_Curie"
    mention = EntityMention("Marie Curie", 8, 19, curie, 0.9, "test")
    assert asked_definition("Who was Marie Curie?", [mention]) == curie
    assert (
        asked_definition(
            "Curie Marie who is Marie Curie", [EntityMention("Marie Curie", 19, 30, curie, 0.9, "test")]
        )
        == curie
    )
    # Her husband, her work: not what she is.
    assert asked_definition("Who was Marie Curie's husband?", [mention]) is None
    assert (
        asked_definition(
            "When did Marie Curie die?", [EntityMention("Marie Curie", 9, 20, curie, 0.9, "test")]
        )
        is None
    )
    texts = (
        "If Marie Curie's work helped overturn established ideas, it had an effect on society.",
        "A number of biographies are devoted to her.",
        "Marie Skłodowska-Curie (7 November 1867 – 4 July 1934) was a Polish physicist. She won twice.",
    )
    candidates = tuple(
        ScoredPassage(Passage(f"p{k}", text, title="Marie Curie"), 1.0 - k / 10)
        for k, text in enumerate(texts)
    )
    inputs = SelectionInput(query="Who was Marie Curie?", candidates=candidates, query_entities=(mention,))
    plain = OriginalOrderSelector(n=2).select(inputs)
    defining = OriginalOrderSelector(n=2, definitions=True).select(inputs)
    assert [p.id for p in plain.passages] == ["p0", "p1"]
    assert [p.id for p in defining.passages] == ["p2", "p0"]
    assert defining.explanation["definition"] == {"entity": curie, "passage": "p2"}
    # Another question: the scores' choice.
    other = OriginalOrderSelector(n=2, definitions=True).select(
        SelectionInput(query="Who was her husband?", candidates=candidates)
    )
    assert [p.id for p in other.passages] == ["p0", "p1"]
