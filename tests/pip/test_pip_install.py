"""`pip install .` as a user does it: build the wheel, install it into a new virtual environment,
and run the Python binding's test suite against that installed package; the same for an editable
install; and the errors an install on the wrong interpreter or a machine missing a library gives.

Each environment is made without system site packages and gets the package and its declared
dependency (numpy, pinned to the version the project's test environment has) from pip, so a plain
`import slidepipe` and the `slidepipe` command work there with no PYTHONPATH. Only then does it
see the test oracles (pytest, openslide, tifffile, torch, ...): a .pth file appends the project
environment's site-packages after its own, so the installed slidepipe and numpy come first and
nothing large is installed twice (docs/python.md, "Tests"). The suite runs with
SLIDEPIPE_IMPORT=installed (python/tests/conftest.py), so build/python is never on its path;
the Ray and Dask cluster tests and the training example are left out there (they run in the
binding's own suite), and the editable install runs three files of it. Building
needs PyPI (scikit-build-core, numpy) or pip's cache. `make test` runs this file in a
section of its own (scripts/run-tests); the tests/ runs leave it out.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
TESTDATA = Path(os.environ.get("SP_TESTDATA", REPO_ROOT.parent / "shared" / "testdata")).resolve()
# The project environment's packages (the test oracles), made visible to the new environments.
ORACLE_SITE = sysconfig.get_paths()["purelib"]
BUILD_TIMEOUT = 1800
SUITE_TIMEOUT = 1800


def clean_env(**extra):
    """The environment for a command in a new venv: no PYTHONPATH, no build folder, no preload."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "LD_PRELOAD", "SLIDEPIPE_BIN",
                        "SLIDEPIPE_IMPORT", "VIRTUAL_ENV")}
    env.update(extra)
    return env


def run(cmd, timeout=BUILD_TIMEOUT, cwd=None, env=None, check=True):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=env if env is not None else clean_env())
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n"
                             f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def make_venv(root: Path) -> Path:
    """A new environment made from this interpreter's base Python; returns its python."""
    run([sys.executable, "-m", "venv", root])
    return root / "bin" / "python"


def pip(python, *args):
    return run([python, "-m", "pip", "--disable-pip-version-check", *args])


def site_packages(python) -> Path:
    out = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    return Path(out.stdout.strip())


def constraints(tmp: Path) -> Path:
    path = tmp / "constraints.txt"
    path.write_text(f"numpy=={np.__version__}\n")
    return path


def where_imported(python, cwd) -> dict:
    """Import slidepipe in a fresh process with a clean environment; where each part came from."""
    code = ("import json, slidepipe, slidepipe._core as c, slidepipe._build as b; "
            "print(json.dumps({'package': slidepipe.__file__, 'core': c.__file__, "
            "'version': slidepipe.__version__, 'cuda': b.CUDA}))")
    import json
    return json.loads(run([python, "-c", code], cwd=cwd).stdout)


def check_fresh_env(python, venv: Path, tmp: Path):
    """Before the oracles are visible: plain import and the command, no PYTHONPATH."""
    where = where_imported(python, cwd=tmp)
    assert Path(where["core"]).resolve().is_relative_to(venv.resolve()), where
    assert "/build/python/" not in where["package"], where
    command = venv / "bin" / "slidepipe"
    assert command.is_file(), f"the wheel did not install the slidepipe command into {command}"
    out = run([command, "--version"], cwd=tmp).stdout
    assert where["version"] in out, (out, where)
    slide = TESTDATA / "generic-tiff"
    if slide.is_dir():
        first = sorted(p for p in slide.iterdir() if p.suffix in (".tif", ".tiff"))
        if first:
            info = run([command, "info", first[0], "--json"], cwd=tmp).stdout
            assert '"levels"' in info
    doctor = run([python, "-m", "slidepipe.doctor"], cwd=tmp, env=clean_env(PATH=os.environ["PATH"]))
    assert "every library is found" in doctor.stdout, doctor.stdout
    assert "libjpeg.so.62" in doctor.stdout and str(command) in doctor.stdout, doctor.stdout
    return where


def run_suite(python, venv: Path, tmp: Path, only=None) -> str:
    """The binding's test suite against the installed package, with the oracles appended; `only`:
    these test files alone."""
    (site_packages(python) / "zz_slidepipe_test_oracles.pth").write_text(ORACLE_SITE + "\n")
    env = clean_env(SLIDEPIPE_IMPORT="installed", SLIDEPIPE_BIN=str(venv / "bin" / "slidepipe"),
                    SP_TESTDATA=str(TESTDATA))
    # The Ray and Dask tests start clusters (a minute each) and the training example trains for
    # half a minute: they test those integrations, not the installation, and run in the
    # binding's own suite, release and ASan, not again here.
    tests = REPO_ROOT / "python" / "tests"
    where = [tests / name for name in only] if only else [
        tests, *(f"--ignore={tests / name}"
                 for name in ("test_ray.py", "test_dask.py", "test_example_train.py"))]
    proc = run([python, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-n", "2",
                "--dist", "loadfile", *where],
               timeout=SUITE_TIMEOUT, cwd=REPO_ROOT, env=env, check=False)
    tail = proc.stdout[-3000:]
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    print(f"\n{venv.name}: {summary}")
    assert proc.returncode == 0, f"the suite failed against the installed package:\n{tail}\n" \
                                 f"{proc.stderr[-2000:]}"
    assert re.search(r"\d+ passed", summary), summary
    return summary


@pytest.fixture(scope="module")
def tmp():
    path = Path(tempfile.mkdtemp(prefix="slidepipe-pip-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def wheel(tmp) -> Path:
    """`pip wheel .` of the repository, built by a new environment's pip (build isolation:
    scikit-build-core comes from PyPI, as for a user)."""
    builder = make_venv(tmp / "builder")
    pip(builder, "wheel", "--no-deps", "-w", tmp / "wheels", REPO_ROOT)
    wheels = list((tmp / "wheels").glob("slidepipe-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def wheel_env(tmp, wheel):
    venv = tmp / "wheel-env"
    python = make_venv(venv)
    pip(python, "install", "-c", constraints(tmp), wheel)
    return python, venv


def test_wheel_holds_package_extension_and_command(wheel):
    import zipfile
    names = zipfile.ZipFile(wheel).namelist()
    tag = sysconfig.get_config_var("SOABI")
    assert f"slidepipe/_core.{tag}.so" in names, names
    assert "slidepipe/__init__.py" in names and "slidepipe/_build.py" in names, names
    assert any(re.fullmatch(r"slidepipe-[\d.]+\.data/scripts/slidepipe", n) for n in names), names
    metadata = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "Requires-Dist: numpy" in metadata
    assert re.search(r"Requires-Dist: torch.*extra == .torch.", metadata), metadata[:2000]
    assert "Requires-Python: >=3.10" in metadata


def test_wheel_install_runs_the_suite(wheel_env, tmp):
    python, venv = wheel_env
    where = check_fresh_env(python, venv, tmp)
    assert Path(where["package"]).resolve().is_relative_to(venv.resolve()), where
    run_suite(python, venv, tmp)


def test_editable_install_runs_the_suite(tmp):
    venv = tmp / "editable-env"
    python = make_venv(venv)
    pip(python, "install", "-c", constraints(tmp), "-e", REPO_ROOT)
    where = check_fresh_env(python, venv, tmp)
    # Editable: the Python files are the repository's own, the extension is in the environment.
    assert Path(where["package"]).resolve() == (REPO_ROOT / "python" / "slidepipe" /
                                                "__init__.py").resolve(), where
    # The whole suite ran against the wheel's package; here the files that reach every module
    # and the extension through the editable layout.
    run_suite(python, venv, tmp, only=("test_binding.py", "test_stores.py", "test_train.py"))


def other_abi(tag: str) -> str:
    """The ABI tag of the next CPython minor version: an extension built for another interpreter."""
    m = re.fullmatch(r"cpython-3(\d+)(.*)", tag)
    assert m, tag
    return f"cpython-3{int(m.group(1)) + 1}{m.group(2)}"


def package_copy(wheel_env, tmp, name) -> Path:
    python, _venv = wheel_env
    dest = tmp / name
    shutil.copytree(site_packages(python) / "slidepipe", dest / "slidepipe")
    return dest


def test_import_under_another_interpreter_names_both(wheel_env, tmp):
    python, _venv = wheel_env
    here = sysconfig.get_config_var("SOABI")
    foreign = other_abi(here)
    copy = package_copy(wheel_env, tmp, "foreign-build")
    core = copy / "slidepipe" / f"_core.{here}.so"
    core.rename(core.with_name(f"_core.{foreign}.so"))
    proc = run([python, "-c", "import slidepipe"], cwd=tmp, env=clean_env(PYTHONPATH=str(copy)),
               check=False)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: slidepipe: "), last
    assert f"built for {foreign}" in last, last
    v = sys.version_info
    assert f"{v.major}.{v.minor}.{v.micro} ({here})" in last, last
    assert "circular import" not in last, last


def test_missing_library_is_named(wheel_env, tmp):
    """An extension whose shared library is gone: the import error and the doctor name it."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler (cc) to build an extension that needs a missing library")
    python, _venv = wheel_env
    work = tmp / "missing-lib"
    work.mkdir()
    (work / "gone.c").write_text("int sp_gone(void) { return 7; }\n")
    (work / "core.c").write_text("#include <unistd.h>\nint sp_gone(void);\n"
                                 "int PyInit__core(void) { return sp_gone() + getpid(); }\n")
    run([cc, "-shared", "-fPIC", "-Wl,-soname,libspgone.so.1", "-o", work / "libspgone.so",
         work / "gone.c"])
    copy = package_copy(wheel_env, tmp, "missing-lib-build")
    here = sysconfig.get_config_var("SOABI")
    core = copy / "slidepipe" / f"_core.{here}.so"
    run([cc, "-shared", "-fPIC", "-o", core, work / "core.c", f"-L{work}", "-lspgone"])
    (work / "libspgone.so").unlink()
    proc = run([python, "-c", "import slidepipe"], cwd=tmp, env=clean_env(PYTHONPATH=str(copy)),
               check=False)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert ("needs shared libraries this machine lacks: libspgone.so.1 (find its package with"
            in last), last
    assert "slidepipe/doctor.py` lists every library" in last, last
    # The doctor runs as a file, without importing the package that cannot import.
    doctor = run([python, copy / "slidepipe" / "doctor.py", core], cwd=tmp, check=False)
    assert doctor.returncode == 1, doctor.stdout
    assert "MISSING libspgone.so.1" in doctor.stdout, doctor.stdout
    assert "ok      libc.so.6" in doctor.stdout, doctor.stdout
    assert "missing libspgone.so.1" in doctor.stderr, doctor.stderr
