"""The offline linker: dictionary building, longest match, ambiguity, spans on awkward input (the shared
helpers: test_entity_dictionary_helpers.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_entity_dictionary_helpers import Resources

from cast.entity.builders.collection_entities import (
    DICTIONARY_FILE,
    EntityDictionary,
    build_entity_resources,
    dictionary_path,
    entities_dir,
    specificity,
)
from cast.entity.builders.surfaces import (
    name_alias,
    plural_form,
    title_aliases,
    usable_surface,
)
from cast.entity.link.dictionary import DictionaryLinker
from cast.entity.link.linkers import entity_uri
from cast.errors import CastError, ConfigError
from cast.infra.cache import Cache
from cast.infra.text import entity_label

# --- dictionary building --------------------------------------------------------------------------------------


def test_title_aliases():
    assert title_aliases("Mercury (planet)") == ["Mercury (planet)", "Mercury"]
    assert title_aliases("Paris, Texas") == ["Paris, Texas", "Paris"]
    assert title_aliases("Sun") == ["Sun"]
    assert name_alias("Marie Curie") == "Curie" and name_alias("Solar system") is None
    assert name_alias("Paris, Texas") is None and name_alias("Mercury (planet)") is None
    assert (plural_form("planet"), plural_form("galaxy"), plural_form("day"), plural_form("church")) == (
        "planets",
        "galaxies",
        "days",
        "churches",
    )
    assert usable_surface("mercury") and not usable_surface("the the") and not usable_surface("1961")


@pytest.fixture(scope="module")
def built(tmp_path_factory, fixtures: Path) -> Path:
    index = tmp_path_factory.mktemp("idx") / "demo"
    index.mkdir()
    return build_entity_resources(index, [fixtures / "entity" / "collection.jsonl"], progress=False)


def test_resources_live_beside_the_index(built: Path):
    assert built == entities_dir(built.with_name("demo")) == dictionary_path(built.with_name("demo")).parent
    assert built.name == "demo.entities"


def test_dictionary_counts_commonness_from_the_collection(built: Path):
    data = json.loads((built / "dictionary.json").read_text(encoding="utf-8"))
    titles = data["titles"]
    assert "List of planets" not in titles and "The The" in titles
    senses = {key: [(titles[e], n) for e, n in counts] for key, counts in data["surfaces"].items()}
    # "mercury" occurs in both passages of Mercury (planet) and in the one of Mercury (element): 1 + 2 vs 1 + 1
    assert senses["mercury"] == [("Mercury (planet)", 3), ("Mercury (element)", 2)]
    assert senses["paris"] == [("Paris", 3), ("Paris, Texas", 2)]
    assert senses["mercury planet"] == [("Mercury (planet)", 1)]
    assert "the the" not in senses  # only stop words: never linked
    # regular plurals, counted on their own (a tie goes to the entity seen first)
    assert senses["suns"] == [("Sun", 1)]
    assert senses["mercuries"] == [("Mercury (planet)", 1), ("Mercury (element)", 1)]
    assert data["passages"] == 20
    # "Curie" (from the names "Marie Curie", "Pierre Curie") is kept only for the article that uses it often
    assert senses["curie"] == [("Marie Curie", 3)]
    assert "conference" not in senses  # "Wannsee Conference" writes it in lower case: a common word


@pytest.fixture
def linker(built: Path) -> DictionaryLinker:
    return DictionaryLinker(mentions="all", resources=Resources(built.with_name("demo"), Cache(None)))


def test_longest_match_and_most_common_sense(linker: DictionaryLinker):
    text = "Mercury and Venus orbit the Sun, far from New York City and the state of New York."
    mentions = linker.link(text, kind="query")
    assert [(m.surface, entity_label(m.entity), m.confidence) for m in mentions] == [
        ("Mercury", "Mercury (planet)", 0.6),
        ("Venus", "Venus", 1.0),
        ("Sun", "Sun", 1.0),
        ("New York City", "New York City", 1.0),
        ("New York", "New York", 1.0),
    ]
    assert all(text[m.start : m.end] == m.surface and m.linker == "dictionary" for m in mentions)


def test_confidence_thresholds_per_kind(built: Path):
    linker = DictionaryLinker(
        mentions="all",
        query_confidence=0.0,
        passage_confidence=0.7,
        resources=Resources(built.with_name("demo"), Cache(None)),
    )
    assert [m.surface for m in linker.link("Mercury and Venus", kind="query")] == ["Mercury", "Venus"]
    assert [m.surface for m in linker.link("Mercury and Venus", kind="passage")] == ["Venus"]
    with pytest.raises(CastError, match="kind must be one of"):
        linker.link("Venus", kind="document")


def test_min_specificity_drops_generic_links_after_the_cache(built: Path, tmp_path: Path):
    # Sun: 1 + 1 use in its article / 5 passages mention it = 0.4; Venus 2 / 4 = 0.5; Mercury (planet) 3 / 4
    assert specificity(2, 5) == 0.4 and specificity(3, 0) == 3.0
    cache = Cache(tmp_path / "cache.sqlite")
    text = "Mercury and Venus orbit the Sun."
    plain = DictionaryLinker(mentions="all", resources=Resources(built.with_name("demo"), cache))
    assert [m.surface for m in plain.link(text)] == ["Mercury", "Venus", "Sun"]
    assert plain.link_specificity("Sun", entity_uri("Sun")) == 0.4
    with pytest.raises(CastError, match="no surface form"):
        plain.link_specificity("Pluto", entity_uri("Pluto"))
    strict = DictionaryLinker(
        mentions="all", min_specificity=0.5, resources=Resources(built.with_name("demo"), cache)
    )
    strict._find = lambda texts: pytest.fail(f"linked again: {texts}")
    assert [m.surface for m in strict.link(text, kind="query")] == ["Mercury", "Venus"]
    assert strict.describe()["min_specificity"] == 0.5
    with pytest.raises(ConfigError, match="min_specificity"):
        DictionaryLinker(min_specificity=-1, resources=Resources(built.with_name("demo"), cache))


def test_bad_input_keeps_spans_exact(linker: DictionaryLinker):
    assert linker.link("") == [] and linker.link(" \n ") == []
    text = "Grüße 🙂 aus Zürich!"
    [mention] = linker.link(text)
    assert (mention.surface, mention.entity) == ("Zürich", entity_uri("Zürich"))
    text = "<div>Trips to <b>Paris</b>&nbsp;&amp; Venus</div>"
    mentions = linker.link(text)
    assert [m.surface for m in mentions] == ["Paris", "Venus"]
    assert all(text[m.start : m.end] == m.surface for m in mentions)
    long_text = "Words that name nothing at all, repeated. " * 400 + "The Sun."
    linker = linker.with_settings(max_chars=1000)
    [mention] = linker.link(long_text)
    assert long_text[mention.start : mention.end] == "Sun" and mention.start == len(long_text) - 4


def test_links_are_cached_by_dictionary_version(built: Path, tmp_path: Path):
    cache = Cache(tmp_path / "cache.sqlite")
    first = DictionaryLinker(mentions="all", resources=Resources(built.with_name("demo"), cache))
    mentions = first.link("Venus and the Sun")
    second = DictionaryLinker(mentions="all", resources=Resources(built.with_name("demo"), cache))
    second._find = lambda texts: pytest.fail(f"linked again: {texts}")
    assert second.link("Venus and the Sun") == mentions


def test_spacy_mentions(built: Path):
    linker = DictionaryLinker(mentions="spacy", resources=Resources(built.with_name("demo"), Cache(None)))
    texts = ["How far is Mercury from the Sun?", "Paris is lovely in spring.", ""]
    mentions = linker.link_batch(texts, kind="query")
    assert [[(m.surface, entity_label(m.entity)) for m in ms] for ms in mentions] == [
        [("Mercury", "Mercury (planet)"), ("Sun", "Sun")],
        [("Paris", "Paris")],
        [],
    ]


def test_a_helper_process_links_as_this_process_does(built: Path):
    texts = [
        "How far is Mercury from the Sun?",
        "Paris is lovely in spring.",
        "",
        "New York City and Venus.",
    ] * 2
    alone, shared = (
        DictionaryLinker(processes=n, resources=Resources(built.with_name("demo"), Cache(None)))
        for n in (1, 2)
    )
    try:
        shared.start_helpers()  # as a pipeline does when it is built: the helper loads meanwhile
        started = list(shared.helpers._helpers)
        alone.start_helpers()  # one process: nothing to start
        assert len(started) == 1 and alone.helpers._helpers == []
        assert shared.link_batch(texts, kind="passage") == alone.link_batch(texts, kind="passage")
        assert shared.helpers._helpers == started  # the same helper answered
    finally:
        shared.helpers.close()
    with pytest.raises(ConfigError, match="processes must be at least 1"):
        DictionaryLinker(processes=0, resources=Resources(built.with_name("demo"), Cache(None)))


def test_cli_builds_links_and_relates(fixtures: Path, tmp_path: Path, capsys):
    import argparse

    from cast.commands import entity as cli

    parser = argparse.ArgumentParser(prog="cast")
    cli.add_parser(parser.add_subparsers(dest="command"))

    def run(*argv: str) -> str:
        args = parser.parse_args(["entity", *argv])
        assert args.func(args) == 0
        return capsys.readouterr().out

    index = tmp_path / "index"
    index.mkdir()  # (the resources go beside an index, which must exist)
    assert "written to" in run(
        "dictionary", "--index", str(index), "--input", str(fixtures / "entity" / "collection.jsonl")
    )
    settings = ["--index", str(index), "--set", "linker.name=dictionary", "--set", "linker.mentions=all"]
    settings += ["--set", "cache_dir=null"]
    [line] = run("link", *settings, "Mercury and Venus").splitlines()
    assert [m["entity"] for m in json.loads(line)["mentions"]] == [
        entity_uri("Mercury (planet)"),
        entity_uri("Venus"),
    ]
    table = run("related", *settings, "Sun", "dbr:Solar_System").splitlines()
    assert table[1].split()[-2:] == ["1.000", "0.731"]  # 1 - log(5/3) / log(20/3)


@pytest.mark.integration
def test_on_real_wikipedia_passages(shared_data: Path, tmp_path: Path):
    import gzip
    import itertools

    sample = tmp_path / "wiki.jsonl"
    with gzip.open(shared_data / "wiki" / "enwiki-2013-core.jsonl.gz", "rt", encoding="utf-8") as lines:
        sample.write_text("".join(itertools.islice(lines, 3000)), encoding="utf-8")
    folder = build_entity_resources(None, [sample], output=tmp_path / "wiki.entities", progress=False)
    linker = DictionaryLinker(mentions="all", entities_dir=str(folder))
    text = "Aristotle wrote about alchemy; Abraham Lincoln never read Animal Farm in Alabama."
    mentions = linker.link(text, kind="query")
    expected = ["Aristotle", "Alchemy", "Abraham Lincoln", "Animal Farm", "Alabama"]
    assert [entity_label(m.entity) for m in mentions] == expected


def test_the_collection_says_how_names_are_written(tmp_path: Path):
    texts = [
        "Yesterday I ate a Big Mac with the Prime Minister.",
        "A Big Mac costs more than fries, said the Prime Minister.",
        "Is a Big Mac healthy? Ask the Prime Minister, not a prime minister.",
        "Big Mac sales rose. A prime minister and another prime minister met a prime minister.",
    ]
    collection = tmp_path / "names.jsonl"
    collection.write_text(
        "".join(
            json.dumps({"id": f"d{i}", "title": "Hamburger", "contents": t}) + "\n"
            for i, t in enumerate(texts)
        )
    )
    folder = build_entity_resources(None, [collection], output=tmp_path / "names.entities", progress=False)
    # Big Mac: capitalised inside sentences 3 times of 4 (once it starts one); Prime Minister 3 times of 7.
    assert json.loads((folder / DICTIONARY_FILE).read_text())["casing"] == {"big mac": "Big Mac"}
    assert EntityDictionary.load(folder).casing == {"big mac": "Big Mac"}


def test_a_collection_without_titles_does_not_replace_the_resources(built: Path, tmp_path: Path):
    before = (built / DICTIONARY_FILE).read_bytes()
    untitled = tmp_path / "untitled.jsonl"
    untitled.write_text('{"id": "m1", "contents": "Mercury is a planet."}\n')
    for collection in (untitled, tmp_path / "empty.jsonl"):
        collection.touch()
        with pytest.raises(CastError, match=r"none of the \d+ passages of .* has an article title"):
            build_entity_resources(built.with_name("demo"), [collection], progress=False)
    assert (built / DICTIONARY_FILE).read_bytes() == before


def test_resources_scanned_in_several_processes_are_the_same(fixtures: Path, tmp_path: Path, monkeypatch):
    from cast.entity.builders import collection_entities

    collection = [fixtures / "entity" / "collection.jsonl"]
    alone = build_entity_resources(None, collection, output=tmp_path / "alone", progress=False)
    monkeypatch.setattr(collection_entities, "SCAN_CHUNK", 3)  # several chunks in flight in each process
    shared = build_entity_resources(None, collection, output=tmp_path / "shared", progress=False, processes=2)
    for name in (DICTIONARY_FILE, "postings.offsets.npy", "postings.passages.npy"):
        assert (shared / name).read_bytes() == (alone / name).read_bytes(), name
