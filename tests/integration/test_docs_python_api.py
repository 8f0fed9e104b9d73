"""The Python API page's notebook runs as written (docs/python-api.md): a conversation answered in a Session, the
topics run and evaluated, two systems compared with significance, the same in PyTerrier, an answer file written."""

from __future__ import annotations

import sys

import pytest
from python_api_page import cells, check_output, run_page


def test_the_page_is_a_notebook_of_several_cells():
    assert len(cells()) >= 5 and all(cell.strip() for cell in cells())


# Minutes: it loads the offline profile's models and walks the fixture conversations four times.
@pytest.mark.slow
def test_the_python_api_page_runs_as_written(core_index, tmp_path):
    check_output(run_page(sys.executable, core_index, tmp_path))
