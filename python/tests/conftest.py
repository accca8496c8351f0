"""Fixtures for the Python binding's tests: which build to import and where the test data is.

The package is imported from the build folder beside the command the rest of the suite runs
($SLIDEPIPE_BIN's folder + /python, default build/python), so the ASan run tests the ASan
build's extension; with SLIDEPIPE_IMPORT=installed (tests/pip) it is the one pip installed.
A build without the extension is a failure, not a skip: the binding is part of `make`. The
shared test data missing skips the data tests with the reason.
"""

import atexit
import os
import shutil
import subprocess
import tempfile
import sys
from pathlib import Path

import pytest

# The per-slide stain estimate cache (docs/stains.md) of this run goes to a folder of its own,
# removed at exit, never the user's ~/.cache; the commands the tests start inherit it.
_CACHE_HOME = tempfile.mkdtemp(prefix="slidepipe-test-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE_HOME
atexit.register(shutil.rmtree, _CACHE_HOME, True)


REPO_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("SLIDEPIPE_BIN", REPO_ROOT / "build" / "slidepipe"))
PACKAGE_DIR = BIN.parent / "python"
TESTDATA = Path(os.environ.get("SP_TESTDATA", REPO_ROOT.parent / "shared" / "testdata")).resolve()

if os.environ.get("SLIDEPIPE_IMPORT") == "installed":
    # tests/pip: the package pip installed into this interpreter's environment (a wheel, or an
    # editable install), found by a plain import; build/python is not put on the path.
    import importlib.util
    if importlib.util.find_spec("slidepipe") is None:
        raise RuntimeError(f"SLIDEPIPE_IMPORT=installed, but {sys.executable} has no slidepipe "
                           "installed")
else:
    if not (PACKAGE_DIR / "slidepipe" / "__init__.py").is_file():
        raise RuntimeError(f"no slidepipe package at {PACKAGE_DIR} (build it with make; it needs "
                           "python3-dev)")
    sys.path.insert(0, str(PACKAGE_DIR))


@pytest.fixture(scope="session")
def testdata():
    if not TESTDATA.is_dir():
        pytest.skip(f"shared testdata not found at {TESTDATA}")
    return TESTDATA


@pytest.fixture(scope="session")
def cli():
    """Run the slidepipe command of the same build; return the completed process. (Without
    LD_PRELOAD: the ASan run preloads the sanitizer's shared runtime into python, and the
    command carries its own.)"""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}

    def run(*args, check=True):
        proc = subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True,
                              timeout=300, env=env)
        if check and proc.returncode != 0:
            raise AssertionError(f"slidepipe {' '.join(map(str, args))} exited "
                                 f"{proc.returncode}: {proc.stderr}")
        return proc
    return run
