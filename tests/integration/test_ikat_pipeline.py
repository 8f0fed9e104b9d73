"""iKAT end to end on a tiny collection: `cast run --config ikat --format ...`, `cast validate`, `cast eval ptkb`."""

from __future__ import annotations

import json

import pytest
from fast_pipeline import FAST, cli_sets

from cast.cli import main
from cast.formats.ikat_runs import read_ikat_run

PASSAGES = [
    (
        "clueweb22-en0035-25-01897",
        1,
        "A vegan Mediterranean diet of whole grains, vegetables, beans and nuts.",
    ),
    ("clueweb22-en0004-30-08099", 2, "The vegan keto diet is a high-fat, low-carbohydrate plant-based diet."),
    ("clueweb22-en0038-84-16253", 4, "Soy-free vegetarian diets avoid tofu for people allergic to soybeans."),
    ("clueweb22-en0020-69-12751", 1, "Lactose intolerant people can drink soy-free plant milks with a diet."),
    ("clueweb22-en0001-00-00001", 0, "Game of Thrones ended with a battle over the city of King's Landing."),
    ("clueweb22-en0001-00-00002", 3, "Android phones from several makers run Google's mobile system."),
    (
        "clueweb22-en0002-00-00003",
        0,
        "Obesity is measured with the BMI, the waist size and the body fat share.",
    ),
]
OFFLINE_AND_QUICK = cli_sets("rewriter.name=raw", *FAST, "ptkb.name=bm25", "ptkb.threshold=0.5")


@pytest.fixture(scope="module")
def ikat_index(tmp_path_factory):
    from cast.index.build import build_index

    folder = tmp_path_factory.mktemp("ikat")
    texts = folder / "tiny_psg_text.jsonl"
    lines = [json.dumps({"doc_id": d, "passage_id": str(p), "passage_text": t}) for d, p, t in PASSAGES]
    texts.write_text("\n".join(lines) + "\n", encoding="utf-8")
    build_index([texts], folder / "index", threads=1)
    return folder / "index"


@pytest.mark.parametrize("fmt", ["ikat2023", "ikat2025"])
def test_cast_run_writes_a_valid_ikat_run_with_the_ptkb_used_and_recorded(
    capsys, tmp_path, fixtures, ikat_index, fmt
):
    topics = fixtures / "ikat" / "2023_test_topics.json"
    argv = ["run", "--config", "ikat", "--index", ikat_index, "--topics", topics, *OFFLINE_AND_QUICK]
    code = main([str(a) for a in [*argv, "--format", fmt, "--output", tmp_path / "x"]])
    out, err = capsys.readouterr()
    assert code == 0, err
    suffix = "jsonl" if fmt == "ikat2025" else "json"
    path = tmp_path / f"x.{fmt}.{suffix}"
    assert f"wrote {path}" in out
    assert "not a valid" not in err

    records = [json.loads(line) for line in (tmp_path / "x.answers.jsonl").read_text().splitlines()]
    assert [r["qid"] for r in records] == ["9-1_1", "9-1_2", "9-1_3", "9-2_1", "9-2_2", "9-2_3"]
    for record in records:
        chosen = record["ptkb_provenance"]["statements"]
        assert len(record["ptkb_provenance"]["scores"]) >= 10  # every statement of the PTKB is scored
        assert record["query"] == " ".join([record["utterance"], *(s["text"] for s in chosen)])
        assert record["config"]["ptkb"]["name"] == "bm25"

    assert main(["validate", "--format", fmt, str(path), "--topics", str(topics)]) == 0
    run = read_ikat_run(path, fmt)
    first = run[0] if fmt == "ikat2025" else run["turns"][0]
    assert first["turn_id"] == "9-1_1"


def test_cast_eval_scores_the_ptkb_rankings_and_the_responses(capsys, tmp_path, fixtures, ikat_index):
    topics = fixtures / "ikat" / "2023_test_topics.json"
    argv = ["run", "--config", "ikat", "--index", ikat_index, "--topics", topics, *OFFLINE_AND_QUICK]
    assert main([str(a) for a in [*argv, "--output", tmp_path / "x"]]) == 0
    capsys.readouterr()
    assert (
        main(["eval", "ptkb", "--answers", str(tmp_path / "x.answers.jsonl"), "--topics", str(topics)]) == 0
    )
    out = capsys.readouterr().out
    assert "nDCG@3" in out and "P@3" in out and "R@3" in out
    assert "4 turns with a relevant statement" in out  # 9-1_1..3 and 9-2_3 have ptkb_provenance
    # Response measures against the written responses of the iKAT topics.
    assert (
        main(["eval", "answers", "--answers", str(tmp_path / "x.answers.jsonl"), "--topics", str(topics)])
        == 0
    )
    out = capsys.readouterr().out
    assert "ROUGE-L" in out and "METEOR" in out
