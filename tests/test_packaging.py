"""The built wheel carries what a non-editable install needs: the pipeline profiles of configs/ among them."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from built_wheel import REPO, build_wheel


def test_wheel_ships_the_profiles_and_an_install_loads_them(tmp_path):
    wheel = build_wheel(tmp_path)
    profiles = sorted(p.name for p in (REPO / "configs").glob("*.yaml"))
    assert "offline.yaml" in profiles
    with zipfile.ZipFile(wheel) as archive:
        for name in profiles:
            assert archive.read(f"cast/configs/{name}") == (REPO / "configs" / name).read_bytes()
        for template in (REPO / "configs" / "prompts").glob("*.txt"):
            assert archive.read(f"cast/configs/prompts/{template.name}") == template.read_bytes()
        # Every data file of the packages (models, the sample, the explorer's page), not only their code.
        shipped = set(archive.namelist())
        for package in ("cast", "entity", "index", "summarize"):
            for path in (REPO / package).rglob("*"):
                if path.is_file() and path.suffix not in (".py", ".pyc"):
                    assert path.relative_to(REPO).as_posix() in shipped
        archive.extractall(tmp_path / "site")
    # As installed: the package alone on the path, outside any checkout.
    code = (
        "import cast, cast.config as c; c.load_config('offline'); c.load_config('paper'); "
        "from cast.prompts import PromptTemplate; PromptTemplate.load('answer', {'passages', 'question'}, {'words'}); "
        "print(cast.__file__); print(c.CONFIG_DIR)"
    )
    found = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"},
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert found == [
        str(tmp_path / "site" / "cast" / "__init__.py"),
        str(tmp_path / "site" / "cast" / "configs"),
    ]
