"""TREC run files: deterministic writing, appending per query, validated reading."""

from __future__ import annotations

import pytest

from cast.errors import DataFormatError
from cast.formats.runfile import TrecRunWriter, format_run_line, read_run, write_run


def test_write_run_orders_by_score_then_docid(tmp_path):
    path = tmp_path / "x.run"
    write_run(path, {"31_1": [("b", 1.0), ("c", 2.0), ("a", 1.0)], "31_2": [("z", 0.5)]}, tag="lmd")
    assert path.read_text().splitlines() == [
        "31_1 Q0 c 1 2.000000 lmd",
        "31_1 Q0 a 2 1.000000 lmd",
        "31_1 Q0 b 3 1.000000 lmd",
        "31_2 Q0 z 1 0.500000 lmd",
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["x.run"]  # no temporary file left behind


def test_write_run_replaces_an_existing_file_whole(tmp_path):
    path = tmp_path / "x.run"
    path.write_text("old content that is longer than the new one\n" * 10)
    write_run(path, {"q": [("d", 1.0)]}, tag="t")
    assert path.read_text() == "q Q0 d 1 1.000000 t\n"


def test_run_writer_appends_query_blocks(tmp_path):
    path = tmp_path / "x.run.partial"
    with TrecRunWriter(path, tag="t") as writer:
        writer.write("q1", [("a", 1.0), ("b", 3.0)])
    with TrecRunWriter(path, tag="t") as writer:  # a resumed run appends
        writer.write("q2", [("c", 0.0)])
    assert path.read_text() == "q1 Q0 b 1 3.000000 t\nq1 Q0 a 2 1.000000 t\nq2 Q0 c 1 0.000000 t\n"


def test_tag_with_space_is_refused(tmp_path):
    with pytest.raises(ValueError, match="whitespace"):
        write_run(tmp_path / "x.run", {}, tag="my run")


def test_read_run_round_trip(tmp_path):
    path = tmp_path / "x.run"
    rankings = {"132_1-1": [("MARCO_1", 3.5), ("KILT_2", -1.25)], "0001_1": [("d", 1.0)]}
    write_run(path, rankings, tag="t")
    assert read_run(path) == {"132_1-1": {"MARCO_1": 3.5, "KILT_2": -1.25}, "0001_1": {"d": 1.0}}
    assert format_run_line("q", "d", 1, 2.0, "t") == "q Q0 d 1 2.000000 t\n"


@pytest.mark.parametrize(
    ("content", "message", "line"),
    [
        ("q Q0 d 1 2.0 t\nq Q0 e 2 1.0\n", "expected 6 fields", 2),
        ("q Q0 d 1 2.0 t extra\n", "found 7", 1),
        ("q Q0 d 1 high t\n", "not a finite number", 1),
        ("q Q0 d 1 nan t\n", "not a finite number", 1),
        ("q Q0 d 1 2.0 t\nq Q0 e 2 1.5 t\nq Q0 d 3 1.0 t\n", "docid d appears twice for query q", 3),
    ],
)
def test_read_run_names_file_line_and_problem(tmp_path, content, message, line):
    path = tmp_path / "bad.run"
    path.write_text(content)
    with pytest.raises(DataFormatError, match=message) as info:
        read_run(path)
    assert info.value.line == line
    assert str(path) in str(info.value)


def test_same_docid_under_two_queries_is_fine(tmp_path):
    path = tmp_path / "x.run"
    path.write_text("q1 Q0 d 1 2.0 t\n\nq2 Q0 d 1 2.0 t\n")
    assert read_run(path) == {"q1": {"d": 2.0}, "q2": {"d": 2.0}}


def test_read_run_missing_or_empty_file(tmp_path):
    with pytest.raises(DataFormatError, match="no such run file"):
        read_run(tmp_path / "absent.run")
    (tmp_path / "empty.run").write_text("\n")
    with pytest.raises(DataFormatError, match="empty"):
        read_run(tmp_path / "empty.run")
