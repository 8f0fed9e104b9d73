"""The offline linker's shared helpers (ids, HTML clean-up, chunks, offsets, the surface matcher) and its
errors before anything is built."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from cast.entity.builders import casing
from cast.entity.builders.collection_entities import (
    build_entity_resources,
)
from cast.entity.builders.surfaces import (
    SurfaceMatcher,
    surface_line,
)
from cast.entity.link.dictionary import DictionaryLinker
from cast.entity.link.linkers import chunk_spans, clean_html, entity_uri, locate, normalise_entity
from cast.errors import CastError, IndexUnavailableError
from cast.infra.cache import Cache
from cast.infra.text import entity_label

# --- shared helpers -------------------------------------------------------------------------------------------


def test_entity_ids():
    assert entity_uri("Mercury (planet)") == "http://dbpedia.org/resource/Mercury_(planet)"
    assert entity_uri("iPod  touch") == "http://dbpedia.org/resource/IPod_touch"
    assert normalise_entity("dbr:Zürich") == "http://dbpedia.org/resource/Zürich"
    assert normalise_entity("http://dbpedia.org/resource/Z%C3%BCrich") == "http://dbpedia.org/resource/Zürich"
    assert normalise_entity("Star Wars: Episode IV") == "http://dbpedia.org/resource/Star_Wars:_Episode_IV"
    assert entity_label("http://dbpedia.org/resource/Mercury_(planet)") == "Mercury (planet)"


def test_clean_html_keeps_a_way_back():
    text = "<p>AT&amp;T in <i>Zürich</i>&#33;</p>"
    clean = clean_html(text)
    assert clean.text == " AT&T in  Zürich ! "
    start = clean.text.index("AT&T")
    assert text[slice(*clean.original_span(start, start + 4))] == "AT&amp;T"
    start = clean.text.index("Zürich")
    assert text[slice(*clean.original_span(start, start + 6))] == "Zürich"
    assert clean_html("plain text").origin is None


@pytest.mark.parametrize("max_chars", [7, 20, 64])
def test_chunk_spans_cover_the_text_and_prefer_sentence_ends(max_chars: int):
    text = "One sentence here. Another one follows, with a comma. " * 3 + "Unbreakable" * 8
    spans = chunk_spans(text, max_chars)
    assert "".join(text[s:e] for s, e in spans) == text
    assert all(e - s <= max_chars for s, e in spans)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    if max_chars == 64:
        assert text[: spans[0][1]].endswith("comma. ")  # the last sentence end within 64
    assert chunk_spans("", 10) == [(0, 0)]


def test_locate_handles_utf16_offsets_and_drift():
    text = "🙂 Zürich and Zürich"
    assert locate(text, "Zürich", 3) == 2  # Java counts the emoji as two units
    assert locate(text, "Zürich", 14) == 13  # an offset that drifted: the nearest occurrence
    assert locate(text, "Basel", 0) is None


# --- linking ----------------------------------------------------------------------------------------------


class Resources:
    def __init__(self, index: Path, cache: Cache):
        self.index_dir = index
        self.cache = cache


def test_missing_dictionary_says_how_to_build_it(tmp_path: Path):
    (tmp_path / "index").mkdir()
    with pytest.raises(CastError, match=r"no entity dictionary .*cast entity dictionary --index"):
        DictionaryLinker(resources=Resources(tmp_path / "index", Cache(None)))
    # A mistyped index is reported as such, not as a dictionary to build beside it.
    with pytest.raises(IndexUnavailableError, match=r"no index at .*typo: build one with `cast index build"):
        DictionaryLinker(resources=Resources(tmp_path / "typo", Cache(None)))


def test_resources_are_not_built_beside_a_missing_index(fixtures: Path, tmp_path: Path):
    with pytest.raises(IndexUnavailableError, match=r"no index at .*typo: build one with `cast index build"):
        build_entity_resources(tmp_path / "typo", [fixtures / "entity" / "collection.jsonl"], progress=False)
    assert list(tmp_path.iterdir()) == []


def test_output_folder_with_other_files_is_not_replaced(fixtures: Path, tmp_path: Path):
    (tmp_path / "notes.txt").write_text("keep me")
    with pytest.raises(CastError, match=r"holds files but no dictionary.json, so it is not replaced"):
        build_entity_resources(
            None, [fixtures / "entity" / "collection.jsonl"], output=tmp_path, progress=False
        )
    assert (tmp_path / "notes.txt").read_text() == "keep me"


def test_surface_matcher_prefers_the_longest_form():
    matcher = SurfaceMatcher(["new york", "new york city", "york", "city"])
    tokens = "i left new york city for york".split()
    found = [(" ".join(tokens[a:b]), form) for a, b, form in matcher.matches(tokens)]
    assert found == [("new york city", 1), ("york", 2)]
    # Every occurrence, overlapping ones included, as the casing scan counts them.
    assert sorted(matcher.every_match(surface_line(tokens))) == [0, 1, 2, 2, 3]


def _longest_first(keys: list[str], tokens: list[str]) -> list[tuple[int, int, int]]:
    """The matching rule spelt out: at each word the longest form starting there, else the next word."""
    ids = {key: number for number, key in enumerate(keys)}
    found, i = [], 0
    while i < len(tokens):
        for end in range(len(tokens), i, -1):
            if " ".join(tokens[i:end]) in ids:
                found.append((i, end, ids[" ".join(tokens[i:end])]))
                i = end
                break
        else:
            i += 1
    return found


def test_surface_matcher_follows_the_longest_first_rule_on_random_texts():
    rng = random.Random(7)
    vocabulary = ["a", "b", "c", "ab", "b c"]
    for _ in range(300):
        keys = list(dict.fromkeys(" ".join(rng.choices(vocabulary, k=rng.randint(1, 3))) for _ in range(4)))
        tokens = " ".join(rng.choices(vocabulary, k=rng.randint(0, 9))).split()
        matcher = SurfaceMatcher(keys)
        assert matcher.matches(tokens) == _longest_first(keys, tokens), (keys, tokens)
        every = sorted(
            form
            for form, key in enumerate(keys)
            for i in range(len(tokens))
            if tokens[i : i + len(key.split())] == key.split()
        )
        assert sorted(matcher.every_match(surface_line(tokens))) == every, (keys, tokens)
    # An empty key names nothing, not even in an empty text.
    assert list(SurfaceMatcher(["", "a"]).every_match(surface_line([]))) == []
    assert SurfaceMatcher([]).matches(["a"]) == []


def _cased_names_by_tokens(text: str) -> list[str]:
    """cast.entity.builders.casing.cased_names's rule spelt out over a token list (its former implementation)."""
    tokens, sentence_start = [], True
    for raw in re.findall(r"\S+", text):
        word = raw.strip(casing._EDGE)
        if word:
            tokens.append((word, sentence_start, raw[0] in casing._EDGE, raw[-1] in casing._EDGE))
        sentence_start = bool(casing._SENTENCE_END.search(raw))
    names = []
    for i, (word, starts_sentence, _, _) in enumerate(tokens):
        if starts_sentence or not word[0].isupper():
            continue
        for j in range(i, min(i + casing.MAX_WORDS, len(tokens))):
            last, _, opens, closes = tokens[j]
            if j > i and (opens or not (last[0].isupper() or last in casing.CONNECTORS)):
                break
            if last[0].isupper():
                name = " ".join(t[0] for t in tokens[i : j + 1])
                if any(c.isupper() for c in name[1:]):
                    names.append(name)
            if closes:
                break
    return names


def test_cased_names_follow_their_rule_on_random_texts():
    rng = random.Random(11)
    pieces = ["Big", "Mac", "of", "the", "(", "(USA)", "he.", '"', "McDonald", "ate", ",", "New", "York:",
              "iPhone", "ÉCOLE", "Ǆx", "da", "Vinci!", "’", "x", "A.", "ΣΑΣ", "«Le", "Monde»"]  # fmt: skip
    for _ in range(2000):
        text = "".join(rng.choice(pieces) + rng.choice([" ", " ", "\n", "\t", "\u00a0"]) for _ in range(12))
        assert list(casing.cased_names(text)) == _cased_names_by_tokens(text), text
