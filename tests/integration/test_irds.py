"""`irds:<id>` topics and qrels: what ir_datasets gives, pointed at local copies of ../shared/data's files (its
IR_DATASETS_HOME in a temporary folder: nothing is downloaded), equals what our readers make of the same files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cast.core.records import to_dict
from cast.formats.topics import load_topics, read_qrels

# ir_datasets' dataset, and the files of ../shared/data/cast it reads, under the names it keeps them.
DATASETS = {
    "trec-cast/v1/2019": {
        "2019/evaluation_topics_v1.0.json": "2019/evaluation_topics_v1.0.json",
        "2019/2019qrels.txt": "2019/2019qrels.txt",
    },
    "trec-cast/v1/2020": {
        "2020/2020_manual_evaluation_topics_v1.0.json": "2020/2020_manual_evaluation_topics_v1.0.json",
        "2020/2020qrels.txt": "2020/2020qrels.txt",
    },
    "trec-cast/v0/train": {
        "2019/train_topics_v1.0.json": "2019/train_topics_v1.0.json",
        "2019/train_topics_mod.qrel": "2019/train_topics_mod.qrel",
    },
}
READ = (
    "import json, sys; from cast.core.records import to_dict; from cast.formats.topics import load_topics, read_qrels; "
    "source, rewrites = sys.argv[1], sys.argv[2] or None; "
    "print(json.dumps({'topics': [to_dict(c) for c in load_topics(source, rewrites=rewrites)], "
    "'qrels': read_qrels(source)}))"
)


@pytest.fixture(scope="module")
def irds_home(shared_data, tmp_path_factory) -> Path:
    """An IR_DATASETS_HOME holding copies of the shared files where ir_datasets looks for them."""
    home = tmp_path_factory.mktemp("ir_datasets")
    for files in DATASETS.values():
        for ours, theirs in files.items():
            (home / "trec-cast" / theirs).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(shared_data / "cast" / ours, home / "trec-cast" / theirs)
    return home


def irds(home: Path, *args: str | Path) -> subprocess.CompletedProcess:
    """A process with ir_datasets reading ``home`` (ir_datasets fixes its paths when first imported)."""
    env = {**os.environ, "IR_DATASETS_HOME": str(home)}
    return subprocess.run(
        [sys.executable, *map(str, args)], env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("dataset", DATASETS)
def test_topics_and_qrels_equal_our_readers_of_the_same_files(irds_home, shared_data, dataset):
    topics_file, qrels_file = (shared_data / "cast" / name for name in DATASETS[dataset])
    # CAsT 2019's manual rewrites are not in ir_datasets: added as to the file.
    rewrites = (
        shared_data / "cast/2019/evaluation_topics_annotated_resolved_v1.0.tsv" if "2019" in dataset else ""
    )
    done = irds(irds_home, "-c", READ, f"irds:{dataset}", rewrites)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    expected = [to_dict(c) for c in load_topics(topics_file, rewrites=rewrites or None)]
    assert found["topics"] == json.loads(json.dumps(expected))
    assert found["qrels"] == read_qrels(qrels_file)
    turns = [t for c in found["topics"] for t in c["turns"]]
    assert (
        len(turns) == {"trec-cast/v1/2019": 479, "trec-cast/v1/2020": 216, "trec-cast/v0/train": 269}[dataset]
    )
    if dataset == "trec-cast/v1/2020":  # the rewrites and canonical results ir_datasets gives
        assert all(t["manual_rewrite"] and t["automatic_rewrite"] and t["response_ids"] for t in turns)


def test_the_commands_take_irds_ids(irds_home, shared_data, tmp_path):
    qrels = read_qrels(shared_data / "cast/2019/2019qrels.txt")
    run = tmp_path / "judged.run"  # a run of the judged passages, best grade first
    run.write_text(
        "".join(
            f"{qid} Q0 {doc} {rank} {-rank} r\n"
            for qid, docs in qrels.items()
            for rank, doc in enumerate(sorted(docs, key=lambda d: (-docs[d], d)), start=1)
        )
    )
    evaluate = ["-m", "cast.cli", "eval", "retrieval", "--run", run, "--qrels"]
    from_irds = irds(irds_home, *evaluate, "irds:trec-cast/v1/2019")
    assert from_irds.returncode == 0, from_irds.stderr
    assert from_irds.stdout == irds(irds_home, *evaluate, shared_data / "cast/2019/2019qrels.txt").stdout
    assert "ndcg_cut_3" in from_irds.stdout.lower() or "ndcg@3" in from_irds.stdout.lower()


def test_what_ir_datasets_cannot_give_is_one_line(irds_home, tmp_path):
    def error(source: str) -> str:
        done = irds(irds_home, "-m", "cast.cli", "run", "--topics", source, "--output", tmp_path / "o")
        assert done.returncode == 1
        (line,) = done.stderr.strip().splitlines()
        return line

    known = "irds:trec-cast/v0/train, irds:trec-cast/v0/train/judged, irds:trec-cast/v1/2019"
    assert "ir_datasets knows no dataset 'trec-cast/v9'; its conversational datasets: " + known in error(
        "irds:trec-cast/v9"
    )
    assert "irds:antique/test: its queries are not conversation turns" in error("irds:antique/test")
    # A subset of the judged turns only would rewrite turns without their history.
    assert "irds:trec-cast/v1/2019/judged: conversation 75 lacks some of its turns" in error(
        "irds:trec-cast/v1/2019/judged"
    )


def test_offline_the_files_ir_datasets_lacks_are_named(tmp_path):
    """No copy under IR_DATASETS_HOME, no way out (a proxy that refuses): one line naming each file, where it goes
    and where ir_datasets downloads it from."""
    env = {**os.environ, "IR_DATASETS_HOME": str(tmp_path / "home"), "HTTPS_PROXY": "http://127.0.0.1:9"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cast.cli",
            "run",
            "--topics",
            "irds:trec-cast/v1/2020",
            "--output",
            tmp_path / "o",
        ],
        env={**env, "HTTP_PROXY": env["HTTPS_PROXY"]},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    expected = tmp_path / "home" / "trec-cast" / "2020" / "2020_manual_evaluation_topics_v1.0.json"
    assert f"irds:trec-cast/v1/2020: ir_datasets lacks its file(s) {expected} (from https://" in line
    assert "2020_manual_evaluation_topics_v1.0.json) and could not download them" in line
    assert "set IR_DATASETS_HOME" in line
