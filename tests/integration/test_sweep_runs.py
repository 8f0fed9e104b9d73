"""`cast sweep` runs on the fixture index: one shared pass, each point equal to its own run."""

import json

import pytest

from cast.cli import main
from cast.sweep import grid_points, stop_point


@pytest.fixture
def sweep_args(core_index, core_entities, fixtures, tmp_path):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1_3 0 p2 3\n1_3 0 p1 1\n1_2 0 p4 2\n2_1 0 p5 2\n")
    sets = [
        "rewriter.name=manual", "reranker.name=none", "linker.name=dictionary", "linker.mentions=all",
        f"linker.entities_dir={core_entities}", "knowledge_base.name=collection", f"knowledge_base.entities_dir={core_entities}",
        "selector.name=eg", "selector.candidates=4", "selector.n=2", "summarizer.name=topk_trim",
    ]  # fmt: skip
    common = ["--index", str(core_index), "--topics", str(fixtures / "core" / "conversations.json")]
    for assignment in sets:
        common += ["--set", assignment]
    return common, qrels


def test_a_selector_sweep_prepares_once_and_each_point_equals_its_own_run(sweep_args, tmp_path, capsys):
    common, qrels = sweep_args
    out = tmp_path / "sweep"
    grid = ["--grid", "selector.gamma=0,1", "--grid", "summarizer.words=8,20"]
    assert (
        main(
            [
                "sweep",
                *common,
                *grid,
                "--output",
                str(out),
                "--qrels",
                str(qrels),
                "--baseline",
                "gamma=1,words=20",
            ]
        )
        == 0
    )
    printed = capsys.readouterr()
    assert "ran 4 points (sharing the turns prepared as far as link)" in printed.out
    assert (out / "prepared.jsonl.gz").is_file() and (out / "sweep.png").stat().st_size > 0
    report = (out / "report.md").read_text()
    assert (
        "Baseline point: gamma=1,words=20." in report and "## Retrieval" in report and "## Answers" in report
    )
    assert "ROUGE-L" in (out / "answers.csv").read_text()
    # A point is what `cast run` with its settings writes (its tag aside).
    assert (
        main(
            [
                "run",
                *common,
                "--set",
                "selector.gamma=0",
                "--set",
                "summarizer.words=8",
                "--output",
                str(tmp_path / "alone"),
            ]
        )
        == 0
    )
    columns = [line.split()[:5] for line in (tmp_path / "alone.run").read_text().splitlines()]
    assert [line.split()[:5] for line in (out / "gamma=0,words=8.run").read_text().splitlines()] == columns
    alone = [json.loads(line) for line in (tmp_path / "alone.answers.jsonl").open()]
    point = [json.loads(line) for line in (out / "gamma=0,words=8.answers.jsonl").open()]
    assert [r["answer"] for r in point] == [r["answer"] for r in alone]
    assert [r["config"] for r in point] == [r["config"] for r in alone]
    # Run again with one more value: the finished points are kept, the prepared turns reused.
    capsys.readouterr()
    grid = ["--grid", "selector.gamma=0,1,0.5", "--grid", "summarizer.words=8,20"]
    assert main(["sweep", *common, *grid, "--output", str(out), "--qrels", str(qrels)]) == 0
    err = capsys.readouterr().err
    assert err.count("(finished earlier)") == 4 and "reusing the prepared turns" in err
    assert (out / "gamma=0.5,words=20.run").is_file()


def test_a_sweep_refuses_a_mistyped_setting_before_any_work_and_another_config_in_its_folder(
    sweep_args, tmp_path, capsys
):
    common, qrels = sweep_args
    out = tmp_path / "sweep"
    assert (
        main(["sweep", *common, "--grid", "selector.gama=0,1", "--output", str(out), "--qrels", str(qrels)])
        != 0
    )
    assert "point gama=0: " in capsys.readouterr().err and not (out / "prepared.jsonl.gz").exists()
    assert main(["sweep", *common, "--grid", "summarizer.words=8,9", "--output", str(out)]) != 0
    assert "give --qrels" in capsys.readouterr().err and not list(out.glob("*.run"))
    assert (
        main(
            ["sweep", *common, "--grid", "summarizer.words=8,9", "--output", str(out), "--qrels", str(qrels)]
        )
        == 0
    )
    capsys.readouterr()
    other = ["--set", "first_stage.mu=10", "--grid", "summarizer.words=8,9"]
    assert main(["sweep", *common, *other, "--output", str(out), "--qrels", str(qrels)]) != 0
    assert "holds a sweep of another config (first_stage.mu: 1000 -> 10)" in capsys.readouterr().err


def test_a_verifier_sweep_shares_the_pass_and_each_point_checks_with_its_own_settings(
    core_index, fixtures, tmp_path
):
    from fast_pipeline import FAST, cli_sets

    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1_3 0 p2 3\n1_2 0 p4 2\n2_1 0 p5 2\n")
    assert stop_point(grid_points(["verifier.min_relevance=0,1"]), [{"selector": {"name": "o"}}]) == "rerank"
    sets = cli_sets("rewriter.name=manual", *FAST, f"cache_dir={tmp_path / 'cache'}", "verifier.name=claims")
    common = ["--index", str(core_index), "--topics", str(fixtures / "core" / "conversations.json"), *sets]
    grid = ["--grid", "verifier.min_relevance=0,1"]
    assert (
        main(
            [
                "sweep",
                "--config",
                "offline",
                *common,
                *grid,
                "--output",
                str(tmp_path / "s"),
                "--qrels",
                str(qrels),
            ]
        )
        == 0
    )
    for value, abstains in (("0", False), ("1", True)):  # no cosine reaches 1: every answer is withheld
        records = [
            json.loads(line) for line in (tmp_path / "s" / f"min_relevance={value}.answers.jsonl").open()
        ]
        assert all(r["config"]["verifier"]["min_relevance"] == float(value) for r in records)
        assert all(r["verification"]["abstained"] is abstains for r in records)
