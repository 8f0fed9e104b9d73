"""Scaling out on Ray (a local runtime of 2 CPUs): collection jobs and runs give the files a local run writes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fast_pipeline import FAST, cli_sets

from cast.errors import CastError
from cast.infra.cluster import RayOptions, map_in_order

# Ray's driver and the JVM in one process crash (a segmentation fault, now and then): `make test` runs these in a
# pytest process of their own, and every command that starts the JVM (building an index, a run) runs in a
# subprocess of its own (`_cast`), as a user would run it, joining the tests' one Ray runtime (`ray_address`).
pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]


def _cast(*argv: object) -> subprocess.CompletedProcess:
    """``cast ARGV`` in a subprocess (the toolkit of this checkout)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(
        [sys.executable, "-m", "cast.cli", *map(str, argv)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


@pytest.fixture(scope="module")
def core_index(fixtures: Path, tmp_path_factory) -> Path:
    """The six-passage fixture corpus indexed in a subprocess (this process must not start the JVM)."""
    index = tmp_path_factory.mktemp("core") / "index"
    done = _cast(
        "index", "build", "--input", fixtures / "core" / "corpus.jsonl", "--index", index, "--threads", "1"
    )
    assert done.returncode == 0, done.stderr
    return index


TWO = RayOptions("local", workers=2)


def test_map_in_order_keeps_the_order_of_the_items(ray_runtime):
    items = list(range(7))
    assert list(map_in_order(abs, (-i for i in items), TWO)) == [(-i, i) for i in items]


def test_a_workers_own_error_comes_back_as_itself(ray_runtime):
    def fail(item):
        raise CastError(f"no index for {item}")

    with pytest.raises(CastError, match="^no index for 1$"):
        list(map_in_order(fail, [1], TWO))


def test_sharded_entity_dictionary_equals_the_local_one(
    ray_runtime, fixtures: Path, tmp_path: Path, monkeypatch
):
    from cast.entity.builders import collection_entities

    collection = [fixtures / "entity" / "collection.jsonl"]
    local = collection_entities.build_entity_resources(
        None, collection, output=tmp_path / "local", progress=False
    )
    monkeypatch.setattr(collection_entities, "SCAN_CHUNK", 3)  # 7 chunks over 2 workers
    sharded = collection_entities.build_entity_resources(
        None, collection, output=tmp_path / "ray", progress=False, ray=TWO
    )
    for name in (
        collection_entities.DICTIONARY_FILE,
        collection_entities.OFFSETS_FILE,
        collection_entities.PASSAGES_FILE,
    ):
        assert (sharded / name).read_bytes() == (local / name).read_bytes(), name
    # The casing table too, counted across chunks ("Solar System" is written so in several of them).
    assert json.loads((sharded / collection_entities.DICTIONARY_FILE).read_text())["casing"] == {
        "solar system": "Solar System"
    }


@pytest.mark.slow
def test_embeddings_built_on_ray_equal_the_local_ones(ray_address, fixtures: Path, tmp_path: Path):
    from cast.index.embeddings import store_path

    collection = fixtures / "index" / "passages.jsonl"  # 7 passages, 2 without text: 4 chunks
    stores = []
    for name, ray in (("local", []), ("ray", ["--ray", ray_address, "--ray-workers", "2"])):
        index = tmp_path / name / "ix"
        built = _cast("index", "build", "--input", collection, "--index", index, "--threads", "1")
        assert built.returncode == 0, built.stderr
        argv = ["index", "embed", "--index", index, "--input", collection, "--chunk-size", "2"]
        embedded = _cast(*argv, "--device", "cpu", *ray)
        assert embedded.returncode == 0, embedded.stderr
        stores.append(store_path(index))
    local, sharded = stores
    assert sorted(p.name for p in sharded.iterdir()) == sorted(p.name for p in local.iterdir())
    for file in local.iterdir():
        assert (sharded / file.name).read_bytes() == file.read_bytes(), file.name


# --- cast run --ray -----------------------------------------------------------------------------------------

BASELINE = cli_sets("rewriter.name=manual", *FAST, "summarizer.words=12")


def _turn(number: str, utterance: str, rewrite: str) -> dict:
    return {"number": number, "utterance": utterance, "manual_rewritten_utterance": rewrite}


@pytest.fixture(scope="module")
def paths_topics(tmp_path_factory) -> Path:
    """CAsT 2022 style: topic 1's two paths share turn 1-1 (answered once); topic 2 stands alone."""
    import json

    glasgow = _turn("1-1", "Tell me about Glasgow.", "Tell me about Glasgow.")
    topics = [
        {"number": 1, "turn": [glasgow, _turn("1-2", "Which river flows through it?", "Which river flows through Glasgow?")]},
        {"number": 1, "turn": [glasgow, _turn("2-2", "What conference was there?", "What climate conference was held in Glasgow?")]},
        {"number": 2, "turn": [_turn("1-1", "What is climate change?", "What is climate change?"), _turn("1-2", "A treaty on it?", "Which treaty is about climate change?")]},
    ]  # fmt: skip
    path = tmp_path_factory.mktemp("topics") / "paths.json"
    path.write_text(json.dumps(topics))
    return path


def _records_without_timings(path: Path) -> list[dict]:
    import json

    return [{**json.loads(line), "timings": None} for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def local_run(core_index, paths_topics, tmp_path_factory) -> Path:
    """The single-process run every Ray run must equal."""
    prefix = tmp_path_factory.mktemp("local") / "run"
    done = _cast("run", "--index", core_index, *BASELINE, "--topics", paths_topics, "--output", prefix)
    assert done.returncode == 0, done.stderr
    return prefix


def test_run_on_ray_writes_the_files_of_the_single_process_run(
    ray_address, core_index, paths_topics, local_run, tmp_path
):
    prefix = tmp_path / "ray"
    argv = ["run", "--index", core_index, *BASELINE, "--topics", paths_topics, "--output", prefix]
    done = _cast(*argv, "--ray", ray_address, "--ray-workers", "2")
    assert done.returncode == 0, done.stderr
    ray_run, local = Path(f"{prefix}.run"), Path(f"{local_run}.run")
    assert ray_run.read_bytes() == local.read_bytes()
    # Answers records differ only in their timings, as two single-process runs' do.
    records = _records_without_timings(Path(f"{prefix}.answers.jsonl"))
    assert records == _records_without_timings(Path(f"{local_run}.answers.jsonl"))
    assert [r["qid"] for r in records] == ["1_1-1", "1_1-2", "1_2-2", "2_1-1", "2_1-2"]


@pytest.mark.slow
def test_run_on_ray_resumes_the_turns_of_an_interrupted_driver(
    ray_address, core_index, paths_topics, local_run, tmp_path
):
    # What a driver killed after its first turn leaves: that turn in the .partial files.
    first = Path(f"{local_run}.answers.jsonl").read_text().splitlines()[0]
    qid = first.split('"qid": "')[1].split('"')[0]
    lines = [x for x in Path(f"{local_run}.run").read_text().splitlines(True) if x.startswith(qid + " ")]
    (tmp_path / "r.run.partial").write_text("".join(lines))
    (tmp_path / "r.answers.jsonl.partial").write_text(first + "\n")

    argv = ["run", "--index", core_index, *BASELINE, "--topics", paths_topics, "--output", tmp_path / "r"]
    done = _cast(*argv, "--ray", ray_address, "--ray-workers", "2")
    assert done.returncode == 0, done.stderr
    assert "resuming: 1 turn(s)" in done.stderr
    assert (tmp_path / "r.run").read_bytes() == Path(f"{local_run}.run").read_bytes()
    assert (tmp_path / "r.answers.jsonl").read_text().splitlines()[0] == first  # kept, not redone


@pytest.mark.slow
def test_a_worker_killed_mid_run_is_restarted_and_no_turn_is_lost_or_repeated(
    ray_runtime, core_index, paths_topics, local_run
):
    import argparse
    import time

    from cast.commands.common import config_from_args
    from cast.conversation.ray_runner import RayRunner
    from cast.formats.topics import load_topics

    args = argparse.Namespace(config="offline", index=str(core_index), overrides=BASELINE[1::2])
    pipeline = RayRunner(config_from_args(args), RayOptions("local", workers=1))
    [actor] = pipeline.pool.actors
    before = ray_runtime.get(actor.pid.remote())
    qids = []

    def kill_once(result) -> None:
        # The one actor runs (or has queued) the next group of conversations now.
        if not qids:
            ray_runtime.kill(actor, no_restart=False)
        qids.append(result.qid)

    try:
        pipeline.run(load_topics(paths_topics), on_result=kill_once)
        # A call sent while the kill is under way may still reach the old process: ask until the new one answers.
        deadline, after = time.monotonic() + 60, before
        while after == before and time.monotonic() < deadline:
            after = ray_runtime.get(actor.pid.remote())
    finally:
        pipeline.close()
    assert after != before  # restarted
    assert sorted(qids) == ["1_1-1", "1_1-2", "1_2-2", "2_1-1", "2_1-2"]


def test_a_worker_without_the_index_says_what_to_mount(ray_runtime, tmp_path):
    from cast.conversation.ray_runner import RayRunner
    from cast.core.config import load_config

    config = load_config("offline", [f"index={tmp_path / 'nowhere'}"])
    with pytest.raises(
        CastError, match=r"the index .*nowhere \(--index\) is not on the Ray worker at .*mount"
    ):
        RayRunner(config, RayOptions("local", workers=1))


def test_an_unreachable_cluster_is_one_error_line(core_index, paths_topics, tmp_path):
    import subprocess
    import sys

    argv = ["run", "--index", core_index, "--topics", paths_topics, "--output", tmp_path / "r"]
    done = subprocess.run(
        [sys.executable, "-m", "cast.cli", *map(str, argv), "--ray", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert done.returncode == 1
    assert done.stderr.startswith("cast run: error: cannot reach a Ray cluster at --ray 127.0.0.1:1 (")
    assert "ray start --head" in done.stderr and not list(tmp_path.iterdir())


def test_a_sweep_on_ray_writes_the_files_of_the_single_process_sweep(
    ray_address, core_index, paths_topics, tmp_path
):
    qrels = tmp_path / "qrels"
    qrels.write_text("1_1-2 0 p4 3\n2_1-1 0 p5 1\n")
    grid = ["--grid", "summarizer.words=5,9", "--qrels", qrels]
    argv = ["sweep", "--index", core_index, *BASELINE, "--topics", paths_topics, *grid]
    local = _cast(*argv, "--output", tmp_path / "local")
    assert local.returncode == 0, local.stderr
    on_ray = _cast(*argv, "--output", tmp_path / "ray", "--ray", ray_address, "--ray-workers", "2")
    assert on_ray.returncode == 0, on_ray.stderr
    assert "(sharing the turns prepared as far as rerank)" in on_ray.stdout
    for point in ("words=5", "words=9"):
        assert (tmp_path / "ray" / f"{point}.run").read_bytes() == (
            tmp_path / "local" / f"{point}.run"
        ).read_bytes()
        ray_answers = _records_without_timings(tmp_path / "ray" / f"{point}.answers.jsonl")
        assert ray_answers == _records_without_timings(tmp_path / "local" / f"{point}.answers.jsonl")
