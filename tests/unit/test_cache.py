from cast.infra.cache import Cache, cache_key


def test_key_is_canonical():
    assert cache_key({"a": 1, "b": [1, 2]}) == cache_key({"b": [1, 2], "a": 1})
    assert cache_key({"a": 1}) != cache_key({"a": 2})


def test_values_persist_across_instances(tmp_path):
    path = tmp_path / "c.sqlite"
    calls = []
    first = Cache(path)
    assert first.get_or_compute("sq", {"x": 3}, lambda: calls.append(3) or 9) == 9
    first.close()
    second = Cache(path)
    assert second.get_or_compute("sq", {"x": 3}, lambda: calls.append(3) or -1) == 9
    assert calls == [3]
    assert second.get("other-namespace", {"x": 3}) is None


def test_many_computes_only_the_missing_in_one_call():
    cache = Cache(None)
    cache.put("len", "ab", 2)
    seen = []

    def compute(texts):
        seen.append(list(texts))
        return [len(t) for t in texts]

    assert cache.get_or_compute_many("len", ["ab", "abc", "a"], compute) == [2, 3, 1]
    assert seen == [["abc", "a"]]
    assert cache.get_or_compute_many("len", ["abc", "a"], compute) == [3, 1]
    assert len(seen) == 1
