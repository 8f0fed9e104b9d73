"""Collection readers (no JVM): each format, format detection, duplicate lists, and errors naming file and line."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import cbor
import pytest

from cast.core.records import Passage
from cast.errors import DataFormatError
from cast.index.collections import detect_format, html_text, read_duplicates, read_passages


@pytest.fixture(scope="module")
def index_fixtures(fixtures: Path) -> Path:
    return fixtures / "index"


def write_car_paragraphs(path: Path, paragraphs: list[tuple[str, list]]) -> None:
    """A TREC CAR paragraphs file: the header, then an indefinite-length list of paragraphs.

    Each paragraph is ``(para_id, bodies)`` where a body is a text string or a ``(anchor, target)`` link.
    """
    items = []
    for para_id, bodies in paragraphs:
        encoded = [
            [0, body] if isinstance(body, str) else [1, [0, body[1], [], body[1].encode(), body[0]]]
            for body in bodies
        ]
        items.append(cbor.dumps([0, para_id.encode(), encoded]))
    path.write_bytes(cbor.dumps(["CAR", [2, ["test"]]]) + b"\x9f" + b"".join(items) + b"\xff")


def test_jsonl_keeps_ids_titles_and_empty_passages(index_fixtures: Path) -> None:
    passages = list(read_passages(index_fixtures / "passages.jsonl"))
    assert [p.id for p in passages] == [
        "kepler-1",
        "galileo-1",
        "newton-1",
        "marathon-1",
        "jogging-1",
        "empty-1",
        "blank-1",
    ]
    assert passages[0] == Passage(
        id="kepler-1",
        text="Kepler's laws describe how planets move in elliptical orbits around the Sun.",
        title="Kepler's laws",
    )
    assert passages[4].title is None
    assert passages[5].text == ""  # empty passages are the indexer's to skip and count


def test_gzip_and_directory_inputs_read_the_same_passages(index_fixtures: Path, tmp_path: Path) -> None:
    plain = list(read_passages(index_fixtures / "passages.jsonl"))
    folder = tmp_path / "collection"
    folder.mkdir()
    (folder / "b.jsonl.gz").write_bytes(gzip.compress((index_fixtures / "passages.jsonl").read_bytes()))
    shutil.copy(index_fixtures / "collection.tsv", folder / "a.tsv")
    (folder / ".hidden").write_text("not a collection file")
    from_folder = list(read_passages(folder))
    assert [p.id for p in from_folder[:3]] == ["MARCO_0", "MARCO_1", "MARCO_7"]
    assert from_folder[3:] == plain


def test_msmarco_tsv_gets_marco_prefixed_ids(index_fixtures: Path) -> None:
    passages = list(read_passages(index_fixtures / "collection.tsv"))
    assert passages[0] == Passage(
        id="MARCO_0", text="The Manhattan Project produced the first nuclear weapons."
    )
    assert len(passages) == 3


def test_car_cbor_paragraphs_get_car_prefixed_ids(tmp_path: Path) -> None:
    path = tmp_path / "paragraphs.cbor"
    write_car_paragraphs(
        path,
        [
            ("00a1b2", ["Pluto was reclassified as a ", ("dwarf planet", "Dwarf%20planet"), " in 2006."]),
            ("ffee99", ["Ceres is in the asteroid belt."]),
        ],
    )
    assert detect_format(path) == "car"
    assert list(read_passages(path)) == [
        Passage(id="CAR_00a1b2", text="Pluto was reclassified as a dwarf planet in 2006."),
        Passage(id="CAR_ffee99", text="Ceres is in the asteroid belt."),
    ]


def test_broken_car_file_is_a_data_format_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.cbor"
    path.write_bytes(cbor.dumps(["CAR", [2, ["test"]]]) + b"\x9f" + cbor.dumps([7, b"x", []]))
    with pytest.raises(DataFormatError, match="broken.cbor: not a TREC CAR paragraphs file"):
        list(read_passages(path, fmt="car"))


def test_wapo_articles_split_into_numbered_paragraphs(index_fixtures: Path) -> None:
    passages = list(read_passages(index_fixtures / "wapo.jsonl"))
    assert passages[:2] == [
        Passage(
            id="WAPO_a1-doc-1",
            text="The James Webb telescope sees infrared light.",
            title="Telescopes of the future",
        ),
        Passage(
            id="WAPO_a1-doc-2",
            text="It orbits the Sun\u2019s second Lagrange point.",
            title="Telescopes of the future",
        ),
    ]
    # Paragraphs are numbered over all paragraph blocks, empty ones included (the indexer skips those).
    assert [(p.id, p.text) for p in passages[2:4]] == [
        ("WAPO_b2-doc-1", ""),
        ("WAPO_b2-doc-2", "Only the second paragraph has text."),
    ]
    assert [p.id for p in passages[4:]] == ["WAPO_c3-doc-1"]


def test_duplicate_lists_drop_the_listed_duplicates(index_fixtures: Path) -> None:
    duplicates = read_duplicates(index_fixtures / "duplicates.txt")
    assert duplicates == {"MARCO_7", "WAPO_c3-doc"}
    inputs = [index_fixtures / "collection.tsv", index_fixtures / "wapo.jsonl"]
    ids = [p.id for p in read_passages(inputs, duplicates=duplicates)]
    assert ids == ["MARCO_0", "MARCO_1", "WAPO_a1-doc-1", "WAPO_a1-doc-2", "WAPO_b2-doc-1", "WAPO_b2-doc-2"]


def test_malformed_duplicate_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "dups.txt"
    path.write_text("MARCO_1:MARCO_2\n\nMARCO_3 MARCO_4\n")
    with pytest.raises(DataFormatError, match=r"dups.txt:3: expected 'docid:dup1,dup2,...'"):
        read_duplicates(path)


@pytest.mark.parametrize(
    ("name", "first_line", "expected"),
    [
        ("c.jsonl", {"id": "1", "contents": "text"}, "jsonl"),
        ("c.json.gz", {"id": "1", "contents": "text"}, "jsonl"),
        ("articles.jsonl", {"id": "1", "contents": [{"type": "sanitized_html", "content": "x"}]}, "wapo"),
        ("collection.tsv", None, "msmarco"),
    ],
)
def test_detect_format_from_name_and_first_record(
    tmp_path: Path, name: str, first_line, expected: str
) -> None:
    path = tmp_path / name
    text = json.dumps(first_line) + "\n" if first_line is not None else "1\tx\n"
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    assert detect_format(path) == expected


def test_unknown_file_type_and_format_name_are_errors(tmp_path: Path) -> None:
    path = tmp_path / "passages.xml"
    path.write_text("<doc/>")
    with pytest.raises(DataFormatError, match="passages.xml: cannot tell the collection format.*--format"):
        list(read_passages(path))
    with pytest.raises(
        DataFormatError, match="unknown format 'trec'; choose one of jsonl, msmarco, car, wapo"
    ):
        list(read_passages(path, fmt="trec"))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "x", "contents": "ok"', "not a JSON object"),
        ('["x", "y"]', "not a JSON object"),
        ('{"contents": "no id"}', "record has no 'id'"),
        ('{"id": "x", "text": "wrong field"}', "record has no text 'contents'"),
    ],
)
def test_malformed_jsonl_line_names_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "ok", "contents": "fine"}\n' + line + "\n")
    with pytest.raises(DataFormatError, match=rf"bad.jsonl:2: {message}") as caught:
        list(read_passages(path))
    assert caught.value.line == 2


def test_malformed_tsv_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "collection.tsv"
    path.write_text("1\tfine\nno tab here\n")
    with pytest.raises(DataFormatError, match=r"collection.tsv:2: expected 'pid<TAB>text'"):
        list(read_passages(path))


def test_missing_input_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="nowhere.jsonl: no such file or directory"):
        list(read_passages(tmp_path / "nowhere.jsonl"))


def test_html_text_strips_tags_and_entities() -> None:
    assert html_text("<p>Fish &amp; chips<br/>  today</p>") == "Fish & chips today"
