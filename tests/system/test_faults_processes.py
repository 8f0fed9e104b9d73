"""Faults that take another process: a second run holding the output's lock, a full disk, a kill -9 in the
middle of a record."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli_audit import cast  # `cast` run in this process
from test_faults import one_error_line
from test_faults_index import (
    reference_run,  # noqa: F401  (fixtures)
    same_outputs,
)

# --- 4. two runs on one output prefix ---------------------------------------------------------------------------


def test_a_second_run_on_a_prefix_is_refused_and_a_killed_holders_lock_is_free(
    capsys, reference_run, tmp_path
):
    import signal
    import subprocess
    import sys

    common, reference = reference_run
    prefix = tmp_path / "shared"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(prefix)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "locked\n"  # it holds the lock now (no sleep: it says so)
        code, _, err = cast(capsys, *common, "--output", prefix)
        assert code == 1
        assert f"another cast run (PID {holder.pid}) is writing {prefix}.run" in one_error_line(err)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        holder.kill()
    assert Path(f"{prefix}.lock").exists()  # left by the killed run, but no process holds it
    code, _, err = cast(capsys, *common, "--output", prefix)
    assert code == 0, err
    assert same_outputs(prefix, reference) and not Path(f"{prefix}.lock").exists()


HOLD_LOCK = """
import sys
from cast.formats.outputs import RunOutputs
with RunOutputs(sys.argv[1], "held").locked():
    print("locked", flush=True)
    sys.stdin.read()
"""


# --- 3. a full disk, and a kill in the middle of a record -----------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A folder on a 16 KiB tmpfs (4 pages: the lock, the run lines and about two answers records fit), and a
    function that grows it to 1 MiB; None where tmpfs cannot be mounted here (not root, or no mount namespace)."""
    import shutil
    import subprocess

    disk = tmp_path / "disk"
    disk.mkdir()
    mount = shutil.which("mount")
    mounted = mount is not None and (
        subprocess.run(
            [mount, "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(disk)], capture_output=True
        ).returncode
        == 0
    )
    if not mounted:
        yield None
        return

    def grow() -> None:
        subprocess.run([mount, "-o", "remount,size=1m", str(disk)], check=True, capture_output=True)

    try:
        yield disk, grow
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


def run_with_file_size_limit(argv: list[object], limit: int) -> tuple[int, str]:
    """``cast`` in a subprocess whose files may not grow beyond ``limit`` bytes (writes fail with EFBIG, as they
    fail with ENOSPC on a full disk; Python ignores the SIGXFSZ that would otherwise end the process)."""
    import resource
    import subprocess
    import sys

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = subprocess.run(
        [sys.executable, "-m", "cast.cli", *map(str, argv)],
        preexec_fn=limited,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stderr


def test_a_full_disk_is_one_line_keeping_the_completed_turns_and_a_rerun_resumes(
    capsys, reference_run, tmp_path, small_disk
):
    common, reference = reference_run
    if small_disk is not None:  # a real full disk (ENOSPC)
        disk, grow = small_disk
        prefix = disk / "r"
        code, _, err = cast(capsys, *common, "--output", prefix)
    else:  # no tmpfs here: a file-size limit (EFBIG) takes the same path through the code
        prefix = tmp_path / "r"
        code, err = run_with_file_size_limit([*common, "--output", prefix], limit=8000)
    assert code == 1
    line = one_error_line(err)
    assert (
        line.startswith("cast run: error: cannot write turn ")
        and f"to {prefix}.answers.jsonl.partial: " in line
    )
    kept = int(line.partition("completed before it are kept")[0].rpartition("the ")[2].split()[0])
    assert 1 <= kept < 5, line
    assert line.endswith("and running the same command again resumes from them")
    assert not Path(f"{prefix}.answers.jsonl").exists()

    if small_disk is not None:
        grow()
    code, _, err = cast(capsys, *common, "--output", prefix)
    assert code == 0, err
    assert f"resuming: {kept} turn(s)" in err
    assert same_outputs(prefix, reference)


KILLED_MID_RECORD = """
import os, signal, sys
import cast.formats.outputs
from cast.cli import main

write = cast.formats.outputs.append_durably
records = 0

def dying(path, text):
    global records
    if str(path).endswith(".answers.jsonl.partial"):
        records += 1
        if records == 3:  # half of the third record reaches the disk, then kill -9
            write(path, text[: len(text) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
    write(path, text)

cast.formats.outputs.append_durably = dying
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow  # a second process starts its own JVM: about 20 s
def test_kill_9_in_the_middle_of_a_record_then_the_same_command_resumes(capsys, reference_run, tmp_path):
    import signal
    import subprocess
    import sys

    common, reference = reference_run
    prefix = tmp_path / "killed"
    argv = [sys.executable, "-c", KILLED_MID_RECORD, *map(str, common), "--output", str(prefix)]
    killed = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not Path(f"{prefix}.answers.jsonl").exists()
    code, _, err = cast(capsys, *common, "--output", prefix)
    assert code == 0, err
    assert "resuming: 2 turn(s)" in err
    assert same_outputs(prefix, reference)


# --- 10. a JVM that cannot start ----------------------------------------------------------------------------------

UNDER_ADDRESS_LIMIT = """
import os, resource, sys
from pathlib import Path
from cast.infra import jvm
from cast.cli import main

start = jvm.start

def limited():  # `ulimit -v` at what the process has mapped, and 256 MB more: too little for a JVM's heap
    used = int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (used + (256 << 20), resource.RLIM_INFINITY))
    start()

jvm.start = limited
sys.exit(main(sys.argv[1:]))
"""


def test_a_jvm_that_cannot_start_is_one_line_on_stderr(reference_run, tmp_path):
    import subprocess
    import sys

    common, _ = reference_run
    done = subprocess.run(
        [sys.executable, "-c", UNDER_ADDRESS_LIMIT, *map(str, common), "--output", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (
        done.returncode == 1 and done.stdout == ""
    )  # the JVM printed nothing where the command's output goes
    assert "Error occurred during initialization of VM" not in done.stderr
    last = done.stderr.strip().split("\n")[-1]
    assert last.startswith("cast run: error: cannot start Java within this process's address-space limit ")
    assert last.endswith("; raise the limit (ulimit -v unlimited)")
