"""The JVM start-up (cast.infra.jvm) and what must keep working beside it."""

import subprocess
import sys

CRASHED_BEFORE = """
import numpy as np
from cast.infra import jvm
from cast.infra.resources import Resources
from cast.rank.first_stage import LMDFirstStage

LMDFirstStage(Resources({"index": sys.argv[1]})).search("glasgow")
matrix = np.random.default_rng(0).random((300, 300)) + 300 * np.eye(300)
print(round(float(np.linalg.solve(matrix, np.ones(300)).sum()), 6))
"""


def test_numpy_linear_algebra_survives_a_running_jvm(core_index):
    # OpenBLAS worker threads used to kill the process (SIGSEGV) once the JVM ran; EG's PageRank hit it.
    code = "import sys\n" + CRASHED_BEFORE
    proc = subprocess.run(
        [sys.executable, "-c", code, str(core_index)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert float(proc.stdout.strip().splitlines()[-1]) > 0


def test_searching_writes_no_java_warnings(core_index):
    # Java 23+ warned on stderr about Lucene's sun.misc.Unsafe use and its MMapDirectory on every command.
    code = (
        "import sys\nfrom cast.infra.resources import Resources\nfrom cast.rank.first_stage import LMDFirstStage\n"
        "print(len(LMDFirstStage(Resources({'index': sys.argv[1]})).search('glasgow')))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(core_index)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-2000:]


def test_ctrl_c_reaches_python_once_the_jvm_runs():
    # The JVM used to take SIGINT and end the process: no KeyboardInterrupt, so no clean-up and no message.
    # A process-directed SIGINT (as Ctrl-C sends) may be taken by any thread, a JVM one too, and reach Python's
    # main thread a moment later: the code waits for it (up to a minute), busy, not past the end of the script.
    # The child starts as a shell's would, SIGINT unblocked and handled by Python: a pytest process that ran the JVM
    # or Ray may hand its children SIGINT blocked or ignored, which is not what this test is about.
    code = (
        "import os, signal, time\n"
        "signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from cast.infra import jvm\njvm.start()\n"
        "try:\n    os.kill(os.getpid(), signal.SIGINT)\n    deadline = time.monotonic() + 60\n"
        "    while time.monotonic() < deadline:\n        pass\n"
        "except KeyboardInterrupt:\n    print('interrupted')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert (proc.returncode, proc.stdout.strip()) == (0, "interrupted"), proc.stderr[-2000:]


def test_java_21_or_newer_is_used():
    from cast.infra import jvm

    assert (jvm._java_major(jvm.java_home()) or 0) >= 21


def test_searching_loads_none_of_pyserinis_query_encoders(core_index):
    # pyserini.search.lucene imports them all (transformers, scikit-learn): seconds of every run's start-up.
    code = (
        "import sys\nfrom cast.infra.resources import Resources\nfrom cast.rank.first_stage import LMDFirstStage\n"
        "hits = LMDFirstStage(Resources({'index': sys.argv[1]})).search('glasgow')\n"
        "print(len(hits), 'pyserini.encode' in sys.modules, 'transformers' in sys.modules)\n"
        "import pyserini.encode\n"  # still importable, for whoever needs it
        "print(hasattr(pyserini.encode, 'QueryEncoder'))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(core_index)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found, encoders, transformers = proc.stdout.split("\n")[0].split()
    assert int(found) > 0 and (encoders, transformers) == ("False", "False")
    assert proc.stdout.split("\n")[1] == "True"
