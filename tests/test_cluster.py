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
