"""The built wheel carries what a non-editable install needs: the pipeline profiles of configs/ among them."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest
from built_wheel import REPO, build_distributions, build_wheel


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The wheel built from a copy of the sources, and the folder it was unpacked into (as installed)."""
    folder = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(folder)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(folder / "site")
    return wheel, folder / "site"


def test_wheel_ships_the_profiles_and_an_install_loads_them(built, tmp_path):
    wheel, site = built
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
                    name = path.relative_to(REPO).as_posix()
                    assert (name if package == "cast" else f"cast/{name}") in shipped
    # As installed: the package alone on the path, outside any checkout.
    code = (
        "import cast, cast.core.config as c; c.load_config('offline'); c.load_config('paper'); "
        "from cast.infra.prompts import PromptTemplate; PromptTemplate.load('answer', {'passages', 'question'}, {'words'}); "
        "print(cast.__file__); print(c.CONFIG_DIR)"
    )
    found = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert found == [
        str(site / "cast" / "__init__.py"),
        str(site / "cast" / "configs"),
    ]


def test_the_wheel_installs_one_import_name_beside_a_users_own_modules(built, tmp_path):
    # A notebook or `python -m` run from a folder with its own index.py and entity.py: the toolkit's packages are
    # cast.index, cast.entity and cast.summarize, so neither shadows the other.
    wheel, site = built
    with zipfile.ZipFile(wheel) as archive:
        top_level = next(n for n in archive.namelist() if n.endswith(".dist-info/top_level.txt"))
        assert archive.read(top_level).decode().split() == ["cast"]
        assert {name.split("/")[0] for name in archive.namelist()} == {"cast", top_level.split("/")[0]}
    for name in ("index", "entity", "summarize"):
        (tmp_path / f"{name}.py").write_text(f"WHOSE = 'the user' + chr(39) + 's {name}.py'\n")
    code = (
        "import cast.index.build, cast.entity.link.wikipedia, cast.summarize.seq2seq\n"
        "from cast.core.registry import STAGES, stage_class\n"
        "for kind, names in STAGES.items():\n"
        "    for name in names:\n"
        "        stage_class(kind, name)\n"
        "import index, entity, summarize\n"
        "print(index.WHOSE, entity.WHOSE, summarize.WHOSE, sep='|')\n"
        "print(cast.entity.link.wikipedia.MODEL_FILE.is_file())"
    )
    # As the wheel installs it, and as this environment has it (the editable install of `make setup`).
    for path in (f"{tmp_path}:{site}", str(tmp_path)):
        found = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            env={"PYTHONPATH": path, "PATH": "/usr/bin:/bin"},
            check=True,
            capture_output=True,
            text=True,
        ).stdout.splitlines()
        assert found == ["the user's index.py|the user's entity.py|the user's summarize.py", "True"]


# Half a minute: the sdist, and the wheel built from it.
@pytest.mark.slow
def test_the_sdist_and_the_wheel_pass_twine_check(tmp_path):
    built = build_distributions(tmp_path)
    (sdist,) = [path for path in built if path.name.endswith(".tar.gz")]
    (wheel,) = [path for path in built if path.suffix == ".whl"]
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", sdist, wheel], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        text = archive.read(metadata).decode()
    assert "Project-URL: Paper, https://arxiv.org/abs/2104.06892" in text
    assert "Classifier: Intended Audience :: Science/Research" in text
