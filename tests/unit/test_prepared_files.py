"""A missing or malformed prepared-turns file is reported."""

import gzip

import pytest

from cast.conversation.prepared import Prepared
from cast.errors import CastError, DataFormatError


def test_a_missing_or_malformed_prepared_file_is_reported(tmp_path):
    with pytest.raises(CastError, match="no prepared turns at .*cast run --stop-after"):
        Prepared.load(tmp_path / "absent.jsonl.gz")
    wrong = tmp_path / "wrong.jsonl.gz"
    with gzip.open(wrong, "wt") as f:
        f.write('{"qid": "1_1"}\n')
    with pytest.raises(DataFormatError, match="wrong.jsonl.gz:1: not a prepared-turns file"):
        Prepared.load(wrong)
    (tmp_path / "plain.txt").write_text("not gzip")
    with pytest.raises(DataFormatError, match="plain.txt: not a readable gzip file"):
        Prepared.load(tmp_path / "plain.txt")
