"""Shared fixtures for slidepipe's Python test suite (real-data oracles, CLI, robustness).

The suite drives the `slidepipe` command line only: every test runs the binary named by
$SLIDEPIPE_BIN (default: build/slidepipe under the repository root) in a subprocess and compares
what it prints or writes with an oracle computed in the same run (OpenSlide 4 through
openslide-python + openslide-bin, libvips' command line). Test files live in the shared test-data
folder ($SP_TESTDATA, default ../shared/testdata beside the repository); its absence skips the
data-driven tests with a reason, while a missing binary is a failure, because a suite that passes
without the program it tests proves nothing.

Parametrisation that depends on the test data (which files exist, which ones OpenSlide opens,
how many levels they have) is done here in pytest_generate_tests, from fixture names, so the test
modules need no imports from this file.
"""

from __future__ import annotations

import atexit
import functools
import json
import math
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

# The per-slide stain estimate cache (docs/stains.md) of this run goes to a folder of its own,
# removed at exit, never the user's ~/.cache; the commands the tests start inherit it.
_CACHE_HOME = tempfile.mkdtemp(prefix="slidepipe-test-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE_HOME
atexit.register(shutil.rmtree, _CACHE_HOME, True)

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BIN = REPO_ROOT / "build" / "slidepipe"
DEFAULT_TESTDATA = REPO_ROOT.parent / "shared" / "testdata"

# Folders holding slides that the reader is expected to support and OpenSlide can check.
ORACLE_FOLDERS = ("aperio", "generic-tiff", "ndpi")
# Files in the test-data folder that are documentation, not slides.
NOT_SLIDES = {"README.md", "reference.json"}

# Lines that a sanitizer (ASan, LSan, UBSan) writes; the suite also runs against such a build.
SANITIZER_MARKERS = (
    "AddressSanitizer",
    "LeakSanitizer",
    "UndefinedBehaviorSanitizer",
    "runtime error:",
    "MemorySanitizer",
    "ThreadSanitizer",
)

DEFAULT_TIMEOUT = 120


# ---- locating things ------------------------------------------------------------------------


def testdata_dir() -> Path:
    """The shared test-data folder, whether or not it exists."""
    env = os.environ.get("SP_TESTDATA")
    return Path(env).resolve() if env else DEFAULT_TESTDATA.resolve()


def testdata_missing_reason() -> str | None:
    root = testdata_dir()
    if not (root.is_dir() and any(root.iterdir())):
        return f"shared testdata not found at {root}"
    return None


def slidepipe_path() -> Path:
    return Path(os.environ.get("SLIDEPIPE_BIN", str(DEFAULT_BIN)))


def all_slide_files() -> list[str]:
    """Every slide file under the test-data folder, as sorted paths relative to it."""
    root = testdata_dir()
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name not in NOT_SLIDES:
            out.append(p.relative_to(root).as_posix())
    return out


@functools.lru_cache(maxsize=None)
def openslide_facts(rel: str):
    """What OpenSlide 4 says about a file, or None when it cannot open it.

    Returns a dict with vendor, levels [(w, h)], downsamples, tile sizes, mpp, objective power and
    associated image sizes. Cached: collection and tests both ask."""
    try:
        import openslide
    except ImportError:  # reported by the tests that need it
        return None
    try:
        slide = openslide.OpenSlide(str(testdata_dir() / rel))
    except Exception:  # OpenSlideUnsupportedFormatError, OpenSlideError
        return None
    props = dict(slide.properties)
    tiles = []
    for level in range(slide.level_count):
        tw = props.get(f"openslide.level[{level}].tile-width")
        th = props.get(f"openslide.level[{level}].tile-height")
        tiles.append((int(tw) if tw else None, int(th) if th else None))
    facts = {
        "vendor": props.get("openslide.vendor"),
        "levels": [tuple(d) for d in slide.level_dimensions],
        "downsamples": list(slide.level_downsamples),
        "tiles": tiles,
        "mpp_x": props.get("openslide.mpp-x"),
        "mpp_y": props.get("openslide.mpp-y"),
        "objective_power": props.get("openslide.objective-power"),
        "associated": {name: tuple(img.size) for name, img in slide.associated_images.items()},
        "properties": props,
    }
    slide.close()
    return facts


def oracle_files() -> list[str]:
    """Files under the oracle folders that OpenSlide 4 opens."""
    return [
        rel
        for rel in all_slide_files()
        if rel.split("/", 1)[0] in ORACLE_FOLDERS and openslide_facts(rel) is not None
    ]


def contract_files() -> list[str]:
    """Every file under the oracle folders (the formats slidepipe must read)."""
    return [rel for rel in all_slide_files() if rel.split("/", 1)[0] in ORACLE_FOLDERS]


def robustness_files() -> list[str]:
    """Files not checked against OpenSlide: everything outside the oracle folders, plus any
    oracle-folder file that OpenSlide cannot open."""
    oracle = set(oracle_files())
    return [rel for rel in all_slide_files() if rel not in oracle]


# ---- collection-time parametrisation -------------------------------------------------------

REGION_KINDS = ("whole", "tiles", "edge", "outside")


def _skip_param(reason: str):
    return pytest.param(None, marks=pytest.mark.skip(reason=reason), id="no-testdata")


def pytest_generate_tests(metafunc):
    """Parametrise tests by the fixture names they ask for:

    oracle_slide   a file OpenSlide opens (facts tests)                 id = relative path
    oracle_level   (file, level) of such a file                         id = path:Lnnn
    oracle_region  (file, level, kind) for kind in REGION_KINDS         id = path:Lnnn:kind
    oracle_assoc   (file, associated image name)                        id = path:name
    contract_slide a file under aperio/ or generic-tiff/                id = relative path
    robust_slide   a file for the robustness tests                      id = relative path
    vips_case      (file, level, kind, loader) for the libvips oracle   id = path:Lnnn:kind:loader
    j2k_level      (file, level) of a JPEG 2000 level of such a file    id = path:Lnnn
    """
    names = set(metafunc.fixturenames)
    wanted = names & {
        "oracle_slide",
        "oracle_level",
        "oracle_region",
        "oracle_assoc",
        "contract_slide",
        "robust_slide",
        "vips_case",
        "j2k_level",
    }
    if not wanted:
        return
    (name,) = wanted  # one data parameter per test
    missing = testdata_missing_reason()
    if missing:
        metafunc.parametrize(name, [_skip_param(missing)])
        return
    try:
        import openslide  # noqa: F401

        have_openslide = True
    except ImportError:
        have_openslide = False
    if name != "contract_slide" and name != "robust_slide" and not have_openslide:
        metafunc.parametrize(
            name, [_skip_param("openslide-python is not installed (tests/requirements.txt)")]
        )
        return

    params = []
    if name == "oracle_slide":
        params = [pytest.param(rel, id=rel) for rel in oracle_files()]
    elif name == "contract_slide":
        params = [pytest.param(rel, id=rel) for rel in contract_files()]
    elif name == "robust_slide":
        params = [pytest.param(rel, id=rel) for rel in robustness_files()]
    elif name == "oracle_level":
        for rel in oracle_files():
            for level in range(len(openslide_facts(rel)["levels"])):
                params.append(pytest.param((rel, level), id=f"{rel}:L{level}"))
    elif name == "oracle_region":
        for rel in oracle_files():
            for level in range(len(openslide_facts(rel)["levels"])):
                for kind in REGION_KINDS:
                    params.append(pytest.param((rel, level, kind), id=f"{rel}:L{level}:{kind}"))
    elif name == "oracle_assoc":
        for rel in oracle_files():
            for assoc in sorted(openslide_facts(rel)["associated"]):
                params.append(pytest.param((rel, assoc), id=f"{rel}:{assoc}"))
    elif name == "vips_case":
        params = vips_cases()
    elif name == "j2k_level":
        for rel in oracle_files():
            for level, dims in enumerate(openslide_facts(rel)["levels"]):
                if _is_jpeg2000(_level_compression(rel, *dims)):
                    params.append(pytest.param((rel, level), id=f"{rel}:L{level}"))
    if not params:
        params = [_skip_param(f"no matching files for {name} under {testdata_dir()}")]
    metafunc.parametrize(name, params)


VIPS_KINDS = ("whole", "tiles", "edge")

# Why some (file, loader) pairs are not compared with libvips; docs/testing.md has the evidence.
VIPS_J2K_REASON = (
    "libvips 8.14 tiffload decodes Aperio JPEG 2000 tiles (compression 33005, RGB) as if they "
    "were YCbCr, so its colours are wrong; this file is compared through openslideload instead"
)
VIPS_FRACTIONAL_REASON = (
    "libvips' openslideload reads a level through openslide_read_region at level-0 coordinates "
    "(vips tile origin x downsample); with a non-integer downsample OpenSlide translates by the "
    "fractional remainder and resamples, so vips' pixels are not the level's decoded pixels"
)
VIPS_UNRELIABLE_REASON = (
    "libvips' openslideload uses OpenSlide 3.4.1, which mis-decodes levels whose tile is wider "
    "than the level (testdata/README.md: UNRELIABLE)"
)


def _is_jpeg2000(name: str | None) -> bool:
    return name is not None and ("JP2000" in name or "JPEG2000" in name)


@functools.lru_cache(maxsize=None)
def _level_compression(rel: str, width: int, height: int) -> str | None:
    """tifffile's compression name of the tiled page with these dimensions, or None."""
    try:
        import tifffile

        with tifffile.TiffFile(testdata_dir() / rel) as tif:
            for page in tif.pages:
                if page.is_tiled and (page.imagewidth, page.imagelength) == (width, height):
                    return page.compression.name
    except Exception:
        return None
    return None


def _first_page_compression(rel: str) -> str | None:
    try:
        import tifffile

        with tifffile.TiffFile(testdata_dir() / rel) as tif:
            return tif.pages[0].compression.name
    except Exception:
        return None


def vips_cases() -> list:
    """Parameters for the libvips oracle.

    generic-tiff: every level through tiffload (page matched by dimensions at test time).
    aperio: every level through openslideload (OpenSlide 3.4.1, skipped where that version is
    unreliable), and level 0 through tiffload page 0 (skipped for JPEG 2000 tiles)."""
    params = []
    for rel in oracle_files():
        facts = openslide_facts(rel)
        folder = rel.split("/", 1)[0]
        for level, ((lw, lh), (tw, th)) in enumerate(zip(facts["levels"], facts["tiles"])):
            loaders = ["tiffload"] if folder == "generic-tiff" else ["openslideload"]
            if folder == "aperio" and level == 0:
                loaders.append("tiffload")
            for loader in loaders:
                marks = []
                if loader == "openslideload" and (tw > lw or th > lh):
                    marks.append(pytest.mark.skip(reason=VIPS_UNRELIABLE_REASON))
                elif loader == "openslideload" and facts["downsamples"][level] != int(
                    facts["downsamples"][level]
                ):
                    marks.append(pytest.mark.skip(reason=VIPS_FRACTIONAL_REASON))
                if (
                    loader == "tiffload"
                    and folder == "aperio"
                    and (_first_page_compression(rel) or "").startswith("APERIO_JP2000")
                ):
                    marks.append(pytest.mark.skip(reason=VIPS_J2K_REASON))
                kinds = list(VIPS_KINDS)
                if (
                    loader == "openslideload"
                    and (_first_page_compression(rel) or "").startswith("APERIO_JP2000")
                ):
                    # Same OpenJPEG as slidepipe (Debian's): the whole level must be equal.
                    kinds.append("full")
                for kind in kinds:
                    params.append(
                        pytest.param(
                            (rel, level, kind, loader),
                            id=f"{rel}:L{level}:{kind}:{loader}",
                            marks=marks,
                        )
                    )
    return params


# ---- running the binary ---------------------------------------------------------------------


def sanitizer_report(text: str) -> str | None:
    """The first line of a sanitizer report in `text`, or None."""
    for line in text.splitlines():
        if any(marker in line for marker in SANITIZER_MARKERS):
            return line
    return None


def binding_env(binary: Path, base: dict | None = None) -> dict:
    """`base` (default: this environment) for a child Python that imports the binding of
    `binary`'s build: its python folder on PYTHONPATH and, in the sanitizer run, the sanitizer's
    runtime preloaded (a stock python cannot load the instrumented extension otherwise; leaks are
    not checked: the interpreter keeps memory until exit by design), as scripts/run-tests does
    for python/tests."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = str(Path(binary).parent / "python")
    if os.environ.get("SLIDEPIPE_SANITIZED"):
        runtime = subprocess.run(["clang", "-print-file-name=libclang_rt.asan-x86_64.so"],
                                 capture_output=True, text=True).stdout.strip()
        env["LD_PRELOAD"] = runtime
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    return env


def describe(proc: subprocess.CompletedProcess) -> str:
    """A short description of a finished process, for assertion messages."""
    err = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.decode("utf-8", "replace")
    out = proc.stdout if isinstance(proc.stdout, str) else proc.stdout.decode("utf-8", "replace")
    return (
        f"command: {' '.join(map(str, proc.args))}\n"
        f"returncode: {proc.returncode}\n"
        f"stderr: {err[-2000:]!r}\n"
        f"stdout: {out[:500]!r}"
    )


class SlidePipe:
    """The slidepipe binary and the few ways the tests call it."""

    def __init__(self, binary: Path):
        self.binary = binary

    sanitizer_report = staticmethod(sanitizer_report)
    describe = staticmethod(describe)

    def run(self, args, timeout: float = DEFAULT_TIMEOUT, check_sanitizer: bool = True):
        """Run `slidepipe ARGS...`; returns the CompletedProcess with text stdout/stderr.

        A timeout raises subprocess.TimeoutExpired (the child is killed). A sanitizer report on
        stderr fails the test at once, whatever the exit code."""
        proc = subprocess.run(
            [str(self.binary), *map(str, args)],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if check_sanitizer:
            line = sanitizer_report(proc.stderr)
            assert line is None, f"sanitizer report: {line}\n{describe(proc)}"
        return proc

    def ok(self, args, timeout: float = DEFAULT_TIMEOUT):
        """Run and require exit 0."""
        proc = self.run(args, timeout)
        assert proc.returncode == 0, describe(proc)
        return proc

    def info(self, path) -> dict:
        """`slidepipe info PATH --json`, parsed."""
        proc = self.ok(["info", path, "--json"])
        try:
            return json.loads(proc.stdout)
        except json.JSONDecodeError as e:
            raise AssertionError(f"info --json printed invalid JSON ({e}):\n{describe(proc)}")

    def read_region(self, path, level, x, y, w, h) -> np.ndarray:
        """`slidepipe region` into a temporary .rgba file; returns uint8 (h, w, 4)."""
        with tempfile.TemporaryDirectory(prefix="sp-region-") as tmp:
            out = Path(tmp) / "region.rgba"
            args = ["region", path, "--level", level, "--x", x, "--y", y]
            args += ["--width", w, "--height", h, "-o", out]
            proc = self.ok(args)
            assert out.is_file(), f"region wrote no file\n{describe(proc)}"
            data = np.fromfile(out, dtype=np.uint8)
        assert data.size == w * h * 4, (
            f"region {w}x{h} wrote {data.size} bytes, expected {w * h * 4} (w*h*4)"
        )
        return data.reshape(h, w, 4)


@pytest.fixture(scope="session")
def slidepipe_bin() -> Path:
    path = slidepipe_path()
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"slidepipe binary not found or not executable at {path} "
            "(build it with `make`, or set SLIDEPIPE_BIN)"
        )
    return path


@pytest.fixture(scope="session")
def mpi_run(slidepipe_bin):
    """mpi_run(ranks, args) -> CompletedProcess of `mpirun -n RANKS slidepipe-mpi ARGS...`, the
    runner beside the slidepipe binary under test. Skips, saying why, when mpirun or the runner
    is missing."""
    mpirun = shutil.which("mpirun")
    runner = slidepipe_bin.parent / "slidepipe-mpi"
    why = ("mpirun not found (apt-get install openmpi-bin)" if mpirun is None
           else None if runner.is_file()
           else f"{runner} was not built (MPI C library not found by CMake)")
    env = dict(os.environ)
    if os.environ.get("SLIDEPIPE_SANITIZED"):
        # Open MPI's own allocations outlive MPI_Finalize; LeakSanitizer would report them.
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"

    def go(ranks: int, args) -> subprocess.CompletedProcess:
        if why is not None:
            print(why)
            pytest.skip(why)
        cmd = [mpirun, "-n", str(ranks), "--oversubscribe"]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")  # containers run tests as root; Open MPI refuses else
        proc = subprocess.run([*cmd, str(runner), *map(str, args)], capture_output=True, text=True,
                              timeout=300, env=env, stdin=subprocess.DEVNULL)
        assert "AddressSanitizer" not in proc.stderr and "runtime error:" not in proc.stderr
        return proc

    return go


@pytest.fixture(scope="session")
def sp(slidepipe_bin) -> SlidePipe:
    return SlidePipe(slidepipe_bin)


@pytest.fixture(scope="session")
def run(sp):
    """run(args, timeout=120) -> CompletedProcess of `slidepipe ARGS...`."""
    return sp.run


@pytest.fixture(scope="session")
def info(sp):
    """info(path) -> the parsed JSON of `slidepipe info PATH --json`."""
    return sp.info


@pytest.fixture(scope="session")
def read_region(sp):
    """read_region(path, level, x, y, w, h) -> uint8 array (h, w, 4) from `slidepipe region`."""
    return sp.read_region


@pytest.fixture(scope="session")
def testdata() -> Path:
    missing = testdata_missing_reason()
    if missing:
        print(missing)
        pytest.skip(missing)
    return testdata_dir()


# ---- comparing pixels -----------------------------------------------------------------------


def diff_report(actual: np.ndarray, expected: np.ndarray, what: str) -> str | None:
    """None when the arrays are equal; otherwise a message with the shape, the maximum absolute
    difference per channel, the fraction of differing pixels and the first differing pixel."""
    if actual.shape != expected.shape:
        return f"{what}: shape {actual.shape} != expected {expected.shape}"
    if np.array_equal(actual, expected):
        return None
    diff = np.abs(actual.astype(np.int16) - expected.astype(np.int16))
    per_channel = diff.reshape(-1, diff.shape[-1]).max(axis=0).tolist()
    differing = diff.max(axis=-1) > 0
    fraction = float(differing.mean())
    yy, xx = np.argwhere(differing)[0]
    msg = (
        f"{what}: pixels differ: max abs diff per channel {per_channel}, "
        f"{int(differing.sum())} of {differing.size} pixels differ ({fraction:.4%}); "
        f"first at (x={xx}, y={yy}): slidepipe {actual[yy, xx].tolist()} "
        f"vs oracle {expected[yy, xx].tolist()}"
    )
    if actual.shape[-1] == 4:
        alpha_mismatch = (actual[..., 3] == 0) != (expected[..., 3] == 0)
        if alpha_mismatch.any():
            msg += f"; transparency differs on {int(alpha_mismatch.sum())} pixels"
    return msg


@pytest.fixture(scope="session")
def assert_same_pixels():
    """assert_same_pixels(actual, expected, what): exact equality with a diagnostic message."""

    def check(actual, expected, what):
        msg = diff_report(actual, expected, what)
        assert msg is None, msg

    return check


# ---- level-0 coordinates for a level position ----------------------------------------------


def level0_exact(lx: int, ds: float) -> int | None:
    """An integer level-0 coordinate X with X / ds == lx exactly in double arithmetic, or None.

    At such an X OpenSlide reads level pixels without a fractional translation (which it would
    otherwise resample with cairo), and floor(X / ds) == lx for slidepipe."""
    x = round(lx * ds)
    return x if x / ds == lx else None


def level0_floor(lx: int, ds: float) -> int:
    """The smallest integer level-0 coordinate X with floor(X / ds) == lx (any lx >= 0)."""
    x = math.ceil(lx * ds)
    while x > 0 and math.floor((x - 1) / ds) >= lx:
        x -= 1
    while math.floor(x / ds) < lx:
        x += 1
    assert math.floor(x / ds) == lx
    return x


def exact_at_or_below(lx: int, ds: float) -> tuple[int, int]:
    """The largest level position <= lx that has an exact level-0 coordinate, and that
    coordinate. Level 0 (position 0) is always exact."""
    for cand in range(lx, -1, -1):
        x = level0_exact(cand, ds)
        if x is not None:
            return cand, x
    return 0, 0


def plan_region(kind: str, level_size, tile_size, ds: float, exact: bool) -> dict:
    """Where to read a region of a given kind on a level.

    kind: "full"    the whole level, whatever its size;
          "whole"   the whole level when it is at most 2048x2048, else a centred 1024x1024 window;
          "tiles"   from (tile_w - 37, tile_h - 23) over 2 tiles + 50 px, so it straddles tile
                    borders (clipped to the level; levels smaller than a tile start at a third);
          "edge"    the last 70x45 level pixels plus 40x30 outside the image (right and bottom);
          "outside" 32x32 wholly beyond the right and bottom edges.
    exact: the origin must have a level-0 coordinate X with X / ds == lx exactly (for comparing
           with OpenSlide, which otherwise translates by the fractional remainder). Positions
           that have none move left/up to the nearest one that has (at worst 0) and the region
           grows by as much, so it still covers what it was meant to cover.
    Returns dict(lx, ly, w, h, x, y): level origin, size in level pixels, level-0 origin."""
    lw, lh = level_size
    tw, th = tile_size
    if kind == "full":
        lx, ly, w, h = 0, 0, lw, lh
    elif kind == "whole":
        if lw <= 2048 and lh <= 2048:
            lx, ly, w, h = 0, 0, lw, lh
        else:
            w, h = min(lw, 1024), min(lh, 1024)
            lx, ly = (lw - w) // 2, (lh - h) // 2
    elif kind == "tiles":
        lx = tw - 37 if 0 <= tw - 37 < lw else lw // 3
        ly = th - 23 if 0 <= th - 23 < lh else lh // 3
        w, h = min(2 * tw + 50, lw - lx), min(2 * th + 50, lh - ly)
    elif kind == "edge":
        lx, ly = max(0, lw - 70), max(0, lh - 45)
        w, h = lw - lx + 40, lh - ly + 30
    elif kind == "outside":
        lx, ly, w, h = lw + 8, lh + 8, 32, 32
    else:
        raise ValueError(kind)

    if kind == "outside":
        # Wholly transparent for both readers whatever the fractional part: OpenSlide's
        # bilinear support is one pixel and the region starts 8 level pixels out.
        return dict(lx=lx, ly=ly, w=w, h=h, x=level0_floor(lx, ds), y=level0_floor(ly, ds))
    if exact:
        nlx, x = exact_at_or_below(lx, ds)
        nly, y = exact_at_or_below(ly, ds)
        w, h = w + (lx - nlx), h + (ly - nly)
        lx, ly = nlx, nly
    else:
        x, y = level0_floor(lx, ds), level0_floor(ly, ds)
    return dict(lx=lx, ly=ly, w=w, h=h, x=x, y=y)


@pytest.fixture(scope="session")
def geometry():
    """Helpers for placing regions: plan_region, level0_exact, level0_floor, exact_at_or_below,
    and is_jpeg2000(relpath, level_width, level_height)."""
    import types

    return types.SimpleNamespace(
        plan_region=plan_region,
        level0_exact=level0_exact,
        level0_floor=level0_floor,
        exact_at_or_below=exact_at_or_below,
        is_jpeg2000=lambda rel, w, h: _is_jpeg2000(_level_compression(rel, w, h)),
    )


@pytest.fixture(scope="session")
def slide_facts():
    """slide_facts(relpath) -> OpenSlide 4's facts about a test-data file (None if unopenable)."""
    return openslide_facts
