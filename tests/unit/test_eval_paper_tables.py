"""bench/paper_tables.py on fixture answers files: rows, published figures beside them, generator table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_scripts import load_bench_script

from cast.evaluate.wordnet import nltk_data_dir

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    not (nltk_data_dir() / "corpora" / "wordnet" / "lexnames").is_file(),
    reason="WordNet not set up: run scripts/setup_wordnet.sh",
)


@pytest.fixture(scope="module")
def paper_tables():
    return load_bench_script("paper_tables")


def test_tables_from_fixture_answers(paper_tables, fixtures, tmp_path, capsys):
    folder = fixtures / "eval"
    # A generator's answers (Table 3): the o answers, relabelled as written by a seq2seq model under EG.
    generated = tmp_path / "bart.answers.jsonl"
    with generated.open("w") as f:
        for line in (folder / "o.answers.jsonl").read_text().splitlines():
            record = json.loads(line)
            record["answer"]["generator"] = "seq2seq:bart-tiny"
            record["config"]["selector"] = {"name": "eg", "gamma": 0.5}
            f.write(json.dumps(record) + "\n")
    answers = [str(folder / "eg-g0.25.answers.jsonl"), str(folder / "o.answers.jsonl"), str(generated)]
    assert paper_tables.main(["--answers", *answers, "--topics", str(folder / "topics.json")]) == 0
    out = capsys.readouterr().out
    table1, table3 = out.split("### Table 3")
    rows = [line for line in table1.splitlines() if line.startswith("| O ") or line.startswith("| EG ")]
    assert rows[0].startswith("| O | o | 13.0 |") and rows[0].endswith("| 28.19 | 42.62 |")  # O first
    assert rows[1].startswith("| EG γ=0.25 | eg-g0.25 |") and rows[1].endswith("| 28.74 | 44.07 |")
    assert "| seq2seq:bart-tiny | EG γ=0.5 | bart |" in table3
    assert "— | — |" in table3  # no published Table 3 figures known
    assert "context only" in out


def test_help_runs(paper_tables, capsys):
    with pytest.raises(SystemExit) as info:
        paper_tables.parse_args(["--help"])
    assert info.value.code == 0
    assert "Table 1" in capsys.readouterr().out
