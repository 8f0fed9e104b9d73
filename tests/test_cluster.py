"""Scaling out on Ray (a local runtime of 2 CPUs): collection jobs and runs give the files a local run writes."""

from pathlib import Path

import pytest

from cast.cluster import RayOptions, map_in_order
from cast.errors import CastError

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
    from entity import dictionary

    collection = [fixtures / "entity" / "collection.jsonl"]
    local = dictionary.build_entity_resources(None, collection, output=tmp_path / "local", progress=False)
    monkeypatch.setattr(dictionary, "SCAN_CHUNK", 3)  # 7 chunks over 2 workers
    sharded = dictionary.build_entity_resources(
        None, collection, output=tmp_path / "ray", progress=False, ray=TWO
    )
    for name in (dictionary.DICTIONARY_FILE, dictionary.OFFSETS_FILE, dictionary.PASSAGES_FILE):
        assert (sharded / name).read_bytes() == (local / name).read_bytes(), name


@pytest.mark.slow
def test_embeddings_built_on_ray_equal_the_local_ones(
    ray_runtime, fixtures: Path, tmp_path: Path, monkeypatch
):
    from cast.cli import main as cast_main
    from index.build import build_index
    from index.embeddings import store_path

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    collection = fixtures / "index" / "passages.jsonl"  # 7 passages, 2 without text: 4 chunks
    stores = []
    for name, ray in (("local", []), ("ray", ["--ray", "--ray-workers", "2"])):
        index = tmp_path / name / "ix"
        build_index([collection], index, threads=1, progress=False)
        argv = ["index", "embed", "--index", str(index), "--input", str(collection), "--chunk-size", "2"]
        assert cast_main([*argv, "--device", "cpu", *ray]) == 0
        stores.append(store_path(index))
    local, sharded = stores
    assert sorted(p.name for p in sharded.iterdir()) == sorted(p.name for p in local.iterdir())
    for file in local.iterdir():
        assert (sharded / file.name).read_bytes() == file.read_bytes(), file.name
