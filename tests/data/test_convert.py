"""`slidepipe convert` and `slidepipe verify`: a slide into a content-addressed OME-Zarr pyramid.

Oracles, all computed in the same run: `slidepipe region` on the source slide (level 0 of the
store must equal it bit for bit), numpy's 2x2 mean with the documented rounding (every lower level
must equal it exactly), zarr-python 3 and tensorstore (they must read what we write, identically),
the OME-NGFF 0.5 rules written out as assertions (and ome-zarr-models' validators), and the
store's own manifest (verify). The kill test interrupts conversions with SIGKILL at seeded random
moments and checks that --resume ends byte-identical to an uninterrupted run.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")

# zarr-python warns about the manifest and marker files, which are not Zarr nodes.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SVS = "aperio/CMU-1-Small-Region.svs"
CODECS = ("zstd", "blosc-lz4", "blosc-zstd", "gzip", "none")
HASH_LINE = re.compile(r"dataset_hash ([0-9a-f]{64})\n")


# ---- helpers ---------------------------------------------------------------------------------


def describe(proc) -> str:
    return (
        f"command: {' '.join(map(str, proc.args))}\nreturncode: {proc.returncode}\n"
        f"stderr: {proc.stderr[-2000:]!r}\nstdout: {proc.stdout[:500]!r}"
    )


def convert(run, src, out, *args, timeout=300) -> str:
    """Run `slidepipe convert SRC OUT ARGS...`, require success, return the dataset hash."""
    proc = run(["convert", src, out, *args], timeout=timeout)
    assert proc.returncode == 0, describe(proc)
    assert proc.stderr == "", f"convert is quiet when stderr is not a terminal\n{describe(proc)}"
    m = HASH_LINE.fullmatch(proc.stdout)
    assert m, f"expected 'dataset_hash HEX'\n{describe(proc)}"
    return m.group(1)


def open_group(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zarr.open_group(str(path), mode="r")


def levels_yxc(path) -> list[np.ndarray]:
    """Every pyramid level of a store as (H, W, 3) arrays, whatever its layout."""
    g = open_group(path)
    attrs = g.attrs.asdict()
    ms = (attrs["ome"] if "ome" in attrs else attrs)["multiscales"][0]
    names = [a["name"] for a in ms["axes"]]
    out = []
    for d in ms["datasets"]:
        a = g[d["path"]][:]
        out.append(a.transpose(1, 2, 0) if names == ["c", "y", "x"] else a)
    return out


def reduce2x2(a: np.ndarray) -> np.ndarray:
    """The documented rule: (a + b + c + d + 2) // 4 over the even-cropped part."""
    h, w = a.shape[0] // 2 * 2, a.shape[1] // 2 * 2
    b = a[:h, :w].astype(np.uint16)
    return ((b[0::2, 0::2] + b[1::2, 0::2] + b[0::2, 1::2] + b[1::2, 1::2] + 2) // 4).astype(
        np.uint8
    )


def tree(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def chunk_files(path: Path) -> list[Path]:
    """Chunk (or shard) files of level arrays: paths whose parts after the array are digits."""
    out = []
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path).parts
        if p.is_file() and rel[0].isdigit() and all(x.isdigit() or x == "c" for x in rel[1:]):
            out.append(p)
    return out


# ---- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("convert")


@pytest.fixture(scope="module")
def synth(run, work) -> Path:
    path = work / "synth3000.tif"
    proc = run(["synth", path, "--size", 3000])
    assert proc.returncode == 0, describe(proc)
    return path


@pytest.fixture(scope="module")
def svs(testdata) -> Path:
    path = testdata / SVS
    if not path.is_file():
        pytest.skip(f"{SVS} is not in the shared test data")
    return path


@pytest.fixture(params=["svs", "synth"])
def source(request) -> Path:
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def default_store(run, work):
    """default_store(src) -> (path, hash) of a default conversion, made once per source."""
    cache = {}

    def get(src: Path):
        if src not in cache:
            out = work / f"default-{src.stem}.zarr"
            cache[src] = (out, convert(run, src, out))
        return cache[src]

    return get


# ---- (a) defaults: level 0 is the slide, each level the 2x2 mean of the one above ----------


def test_default_store_equals_source(source, default_store, info, read_region, assert_same_pixels):
    out, _ = default_store(source)
    facts = info(source)
    w, h = facts["levels"][0]["width"], facts["levels"][0]["height"]

    zarray = json.loads((out / "0" / ".zarray").read_text())
    assert zarray["zarr_format"] == 2 and zarray["dtype"] == "|u1"
    assert zarray["shape"] == [3, h, w] and zarray["chunks"] == [3, 512, 512]
    assert zarray["dimension_separator"] == "/"
    assert zarray["compressor"]["id"] == "zstd"
    assert json.loads((out / ".zgroup").read_text()) == {"zarr_format": 2}

    levels = levels_yxc(out)
    rgba = read_region(source, 0, 0, 0, w, h)
    assert (rgba[..., 3] == 255).all(), "the source region is opaque inside the slide"
    assert_same_pixels(levels[0], rgba[..., :3], f"{source.name}: store level 0 vs region")
    for k in range(1, len(levels)):
        assert levels[k].shape == (levels[k - 1].shape[0] // 2, levels[k - 1].shape[1] // 2, 3)
        assert_same_pixels(levels[k], reduce2x2(levels[k - 1]), f"{source.name}: level {k}")
    # Automatic depth: down to the first level that fits one chunk.
    last = levels[-1]
    assert last.shape[0] <= 512 and last.shape[1] <= 512
    assert levels[-2].shape[0] > 512 or levels[-2].shape[1] > 512


def test_default_metadata(source, default_store, info):
    out, _ = default_store(source)
    facts = info(source)
    attrs = json.loads((out / ".zattrs").read_text())
    ms = attrs["multiscales"]
    assert isinstance(ms, list) and len(ms) == 1
    m = ms[0]
    assert m["version"] == "0.4" and m["name"] == source.name and m["type"] == "mean"
    assert [a["name"] for a in m["axes"]] == ["c", "y", "x"]
    assert [a["type"] for a in m["axes"]] == ["channel", "space", "space"]
    mpp_x, mpp_y = facts["mpp_x"], facts["mpp_y"]
    for k, d in enumerate(m["datasets"]):
        assert d["path"] == str(k)
        (t,) = d["coordinateTransformations"]
        assert t["type"] == "scale"
        if mpp_x is None:
            assert t["scale"] == [1, 2**k, 2**k]
        else:
            assert t["scale"] == pytest.approx([1, mpp_y * 2**k, mpp_x * 2**k], rel=1e-12)
            assert m["axes"][1]["unit"] == m["axes"][2]["unit"] == "micrometer"
    channels = attrs["omero"]["channels"]
    assert [c["color"] for c in channels] == ["FF0000", "00FF00", "0000FF"]
    sp = attrs["slidepipe"]
    assert sp["source"] == {"format": facts["format"], "width": facts["levels"][0]["width"],
                            "height": facts["levels"][0]["height"]}
    assert sp["properties"] == facts["properties"]
    assert set(sp["associated"]) == set(facts["associated"])
    for name, a in sp["associated"].items():
        assert a["path"] == f"associated/{name}"
        assert (a["width"], a["height"]) == (facts["associated"][name]["width"],
                                             facts["associated"][name]["height"])


def test_associated_images(svs, default_store, run, work):
    imagecodecs = pytest.importorskip("imagecodecs")
    out, _ = default_store(svs)
    g = open_group(out)
    sp = g.attrs["slidepipe"]
    assert sp["associated"], "CMU-1-Small-Region.svs has associated images"
    for name, a in sp["associated"].items():
        arr = g[a["path"]]
        assert arr.shape == (a["height"], a["width"], 3)
        assert arr.chunks == (min(a["height"], 1024), min(a["width"], 1024), 3)
        png = work / f"assoc-{name}.png"
        proc = run(["associated", svs, name, "-o", png])
        assert proc.returncode == 0, describe(proc)
        rgba = imagecodecs.png_decode(png.read_bytes())
        assert (rgba[..., 3] == 255).all()
        assert np.array_equal(arr[:], rgba[..., :3]), f"associated image {name} differs"


# ---- (b) OME-Zarr 0.5 on Zarr v3, with and without sharding --------------------------------

SPACE_UNITS = {
    "angstrom", "attometer", "centimeter", "decimeter", "exameter", "femtometer", "foot",
    "gigameter", "hectometer", "inch", "kilometer", "megameter", "meter", "micrometer", "mile",
    "millimeter", "nanometer", "parsec", "petameter", "picometer", "terameter", "yard",
    "yoctometer", "yottameter", "zeptometer", "zettameter",
}
TIME_UNITS = {
    "attosecond", "centisecond", "day", "decisecond", "exasecond", "femtosecond", "gigasecond",
    "hectosecond", "hour", "kilosecond", "megasecond", "microsecond", "millisecond", "minute",
    "nanosecond", "petasecond", "picosecond", "second", "terasecond", "yoctosecond",
    "yottasecond", "zeptosecond", "zettasecond",
}


def check_ome_ngff_05(root: Path):
    """The OME-NGFF 0.5 "multiscales" rules, as assertions."""
    group = json.loads((root / "zarr.json").read_text())
    assert group["zarr_format"] == 3 and group["node_type"] == "group"
    ome = group["attributes"]["ome"]
    assert ome["version"] == "0.5"
    multiscales = ome["multiscales"]
    assert isinstance(multiscales, list) and len(multiscales) >= 1
    for ms in multiscales:
        assert "version" not in ms, "0.5 keeps the version in attributes.ome only"
        axes = ms["axes"]
        assert 2 <= len(axes) <= 5
        names = [a["name"] for a in axes]
        assert len(set(names)) == len(names), "axis names are unique"
        types = [a.get("type") for a in axes]
        assert types.count("channel") <= 1 and types.count("time") <= 1
        assert 2 <= types.count("space") <= 3
        n_space = types.count("space")
        assert types[-n_space:] == ["space"] * n_space, "space axes come last"
        if "time" in types:
            assert types[0] == "time", "time comes first"
        for a in axes:
            if "unit" in a:
                allowed = SPACE_UNITS if a["type"] == "space" else TIME_UNITS if a["type"] == "time" else None
                assert allowed is None or a["unit"] in allowed, f"unit {a['unit']!r}"
        datasets = ms["datasets"]
        assert len(datasets) >= 1
        previous_shape, previous_scale = None, None
        for d in datasets:
            meta = json.loads((root / d["path"] / "zarr.json").read_text())
            assert meta["node_type"] == "array"
            assert len(meta["shape"]) == len(axes)
            assert meta["dimension_names"] == names
            cts = d["coordinateTransformations"]
            kinds = [t["type"] for t in cts]
            assert kinds in (["scale"], ["scale", "translation"]), kinds
            scale = cts[0]["scale"]
            assert len(scale) == len(axes) and all(s > 0 for s in scale)
            if len(cts) == 2:
                assert len(cts[1]["translation"]) == len(axes)
            if previous_shape is not None:
                # Ordered from the highest resolution to the lowest.
                assert all(a <= b for a, b in zip(meta["shape"], previous_shape))
                assert all(a >= b for a, b in zip(scale, previous_scale))
            previous_shape, previous_scale = meta["shape"], scale
        for t in ms.get("coordinateTransformations", []):
            assert t["type"] in ("scale", "translation")


def tensorstore_levels(root: Path, n: int) -> list[np.ndarray]:
    ts = pytest.importorskip("tensorstore")
    out = []
    for k in range(n):
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root / str(k))}}
        out.append(ts.open(spec).result().read().result().transpose(1, 2, 0))
    return out


@pytest.mark.parametrize("shard", [None, 2], ids=["unsharded", "shard2"])
def test_ome_zarr_05(svs, run, work, default_store, shard, assert_same_pixels):
    out = work / f"v3-{shard}.zarr"
    args = ["--format", "ome-zarr-0.5"]
    if shard:
        args += ["--shard", shard, "--chunk", 256]
    convert(run, svs, out, *args)
    check_ome_ngff_05(out)
    meta = json.loads((out / "0" / "zarr.json").read_text())
    if shard:
        (codec,) = meta["codecs"]
        assert codec["name"] == "sharding_indexed"
        assert codec["configuration"]["chunk_shape"] == [3, 256, 256]
        assert meta["chunk_grid"]["configuration"]["chunk_shape"] == [3, 512, 512]
    else:
        assert meta["chunk_grid"]["configuration"]["chunk_shape"] == [3, 512, 512]

    by_zarr = levels_yxc(out)
    by_ts = tensorstore_levels(out, len(by_zarr))
    reference = levels_yxc(default_store(svs)[0])
    assert len(by_zarr) == len(reference) + (1 if shard else 0)
    for k, (a, b) in enumerate(zip(by_zarr, by_ts)):
        assert_same_pixels(b, a, f"tensorstore vs zarr-python, level {k}")
    for k, ref in enumerate(reference):
        assert_same_pixels(by_zarr[k], ref, f"v3 vs v2 level {k}")

    try:
        from ome_zarr_models.v05.image import Image
    except ImportError:
        print("ome-zarr-models is not installed: only the explicit 0.5 checks ran")
    else:
        image = Image.from_zarr(open_group(out))
        assert len(image.attributes.ome.multiscales[0].datasets) == len(by_zarr)


def test_ome_zarr_04_validates(svs, default_store):
    try:
        from ome_zarr_models.v04.image import Image
    except ImportError:
        pytest.skip("ome-zarr-models is not installed")
    out, _ = default_store(svs)
    image = Image.from_zarr(open_group(out))
    assert [a.name for a in image.attributes.multiscales[0].axes] == ["c", "y", "x"]


# ---- (c) codecs and layouts ------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["ome-zarr-0.4", "ome-zarr-0.5"])
@pytest.mark.parametrize("codec", CODECS)
def test_codec_round_trip(synth, run, work, default_store, codec, fmt, assert_same_pixels):
    out = work / f"codec-{codec}-{fmt}.zarr"
    convert(run, synth, out, "--codec", codec, "--format", fmt)
    levels = levels_yxc(out)
    reference = levels_yxc(default_store(synth)[0])
    assert len(levels) == len(reference)
    for k, (a, b) in enumerate(zip(levels, reference)):
        assert_same_pixels(a, b, f"{codec} {fmt} level {k}")
    if fmt == "ome-zarr-0.4":
        compressor = json.loads((out / "0" / ".zarray").read_text())["compressor"]
        expected = {"zstd": ("zstd", None), "blosc-lz4": ("blosc", "lz4"),
                    "blosc-zstd": ("blosc", "zstd"), "gzip": ("gzip", None)}.get(codec)
        if expected is None:
            assert compressor is None
        else:
            assert compressor["id"] == expected[0]
            if expected[1]:
                assert compressor["cname"] == expected[1]
    else:
        by_ts = tensorstore_levels(out, 1)
        assert_same_pixels(by_ts[0], levels[0], f"{codec}: tensorstore level 0")


@pytest.mark.parametrize("fmt", ["ome-zarr-0.4", "ome-zarr-0.5"])
def test_layout_yxc(synth, run, work, default_store, fmt, assert_same_pixels):
    out = work / f"yxc-{fmt}.zarr"
    convert(run, synth, out, "--layout", "yxc", "--chunk", 256, "--format", fmt)
    g = open_group(out)
    a0 = g["0"]
    assert a0.shape == (3000, 3000, 3) and a0.chunks == (256, 256, 3)
    if fmt == "ome-zarr-0.5":
        assert json.loads((out / "0" / "zarr.json").read_text())["dimension_names"] == ["y", "x", "c"]
        axes = g.attrs["ome"]["multiscales"][0]["axes"]
    else:
        axes = g.attrs["multiscales"][0]["axes"]
    assert [a["name"] for a in axes] == ["y", "x", "c"]
    levels = levels_yxc(out)
    reference = levels_yxc(default_store(synth)[0])
    assert_same_pixels(levels[0], reference[0], "yxc level 0")
    for k in range(1, len(levels)):
        assert_same_pixels(levels[k], reduce2x2(levels[k - 1]), f"yxc level {k}")


def test_odd_chunk_and_explicit_levels(svs, run, work, assert_same_pixels, read_region):
    """A chunk side that is odd makes level bands start on odd rows (the reducer carries a row
    across bands); --levels asks for a depth."""
    out = work / "odd.zarr"
    convert(run, svs, out, "--chunk", 257, "--levels", 3, "--threads", 3)
    levels = levels_yxc(out)
    assert len(levels) == 3
    rgba = read_region(svs, 0, 0, 0, levels[0].shape[1], levels[0].shape[0])
    assert_same_pixels(levels[0], rgba[..., :3], "chunk 257 level 0")
    for k in range(1, 3):
        assert_same_pixels(levels[k], reduce2x2(levels[k - 1]), f"chunk 257 level {k}")


# ---- (d) determinism, info, verify -----------------------------------------------------------


def test_hash_independent_of_threads(svs, run, work, default_store):
    _, reference = default_store(svs)
    outs = []
    for t in (1, 2):
        out = work / f"threads-{t}.zarr"
        assert convert(run, svs, out, "--threads", t) == reference
        outs.append(out)
    assert tree(outs[0]) == tree(outs[1])
    manifest = (outs[0] / "slidepipe-manifest.sha256").read_bytes()
    import hashlib

    assert hashlib.sha256(manifest).hexdigest() == reference


def test_json_output(synth, run, work, default_store):
    out = work / "json.zarr"
    proc = run(["convert", synth, out, "--json"])
    assert proc.returncode == 0, describe(proc)
    doc = json.loads(proc.stdout)
    assert doc["dataset_hash"] == default_store(synth)[1]
    assert doc["levels"] == len(levels_yxc(out))
    assert doc["seconds"] >= 0


def test_info_prints_dataset_hash(svs, default_store, info):
    out, digest = default_store(svs)
    facts = info(out)
    assert facts["format"] == "ome-zarr"
    assert facts["dataset_hash"] == digest


def test_verify(svs, run, work):
    out = work / "verify.zarr"
    digest = convert(run, svs, out)
    proc = run(["verify", out])
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.startswith("0 problems") and digest in proc.stdout
    proc = run(["verify", out, "--json"])
    doc = json.loads(proc.stdout)
    assert doc["intact"] is True and doc["problems"] == [] and doc["dataset_hash"] == digest

    chunks = chunk_files(out)
    flipped, deleted = chunks[3], chunks[7]
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0x01
    flipped.write_bytes(bytes(data))
    proc = run(["verify", out])
    assert proc.returncode == 1, describe(proc)
    rel = flipped.relative_to(out).as_posix()
    assert f"changed {rel}\n" in proc.stdout, describe(proc)

    deleted.unlink()
    proc = run(["verify", out, "--json"])
    assert proc.returncode == 1, describe(proc)
    problems = {(p["path"], p["problem"]) for p in json.loads(proc.stdout)["problems"]}
    # The pixels read back no longer give the recorded pixel hash: a chunk that no longer decodes
    # is "unreadable", one that decodes to other pixels (or is missing: fill) is "changed".
    pixels = {p for p in problems if p[0] == "pixel_hash"}
    assert len(pixels) == 1 and pixels <= {("pixel_hash", "changed"), ("pixel_hash", "unreadable")}
    assert problems - pixels == {(rel, "changed"), (deleted.relative_to(out).as_posix(), "missing")}


# ---- (e) SIGKILL at random moments, then --resume ---------------------------------------------


def count_chunks(path: Path) -> int:
    n = 0
    for dirpath, _, files in os.walk(path):
        n += sum(1 for f in files if f.isdigit())
    return n


def test_kill_and_resume(run, work, slidepipe_bin):
    """Five runs killed at seeded random points (a random number of chunks written, so the kill
    lands mid-conversion whatever the machine's speed), each resuming the killed state, then a
    last --resume that completes: the tree equals an uninterrupted conversion's byte for byte."""
    src = work / "synth4096.tif"
    proc = run(["synth", src, "--size", 4096])
    assert proc.returncode == 0, describe(proc)
    reference = work / "kill-reference.zarr"
    expected = convert(run, src, reference, "--chunk", 256)
    total = count_chunks(reference)

    out = work / "killed.zarr"
    rng = random.Random(20260404)
    kills = 0
    for round_ in range(5):
        existing = count_chunks(out) if out.exists() else 0
        if existing >= total - 1:
            break
        target = rng.randint(existing + 1, min(total - 1, existing + total // 3))
        args = [str(slidepipe_bin), "convert", str(src), str(out), "--chunk", "256"]
        if round_ > 0:
            args.append("--resume")
        child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while child.poll() is None and time.monotonic() < deadline:
            if out.exists() and count_chunks(out) >= target:
                break
            time.sleep(0.002)
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
            kills += 1
        _, err = child.communicate(timeout=120)
        assert child.returncode in (0, -signal.SIGKILL), err
        print(f"round {round_}: target {target} chunks, killed={child.returncode < 0}, "
              f"{count_chunks(out)} of {total} on disk")
    assert kills >= 3, f"only {kills} of 5 runs were killed before they finished"
    digest = convert(run, src, out, "--chunk", 256, "--resume")
    assert digest == expected
    leftovers = [p for p in out.rglob("*") if ".tmp-" in p.name]
    assert not leftovers, f"temporary files left: {leftovers[:5]}"
    a, b = tree(reference), tree(out)
    assert sorted(a) == sorted(b)
    differing = [k for k in a if a[k] != b[k]]
    assert not differing, f"files differ after resume: {differing[:5]}"


def test_resume_refuses_other_options(synth, run, work):
    out = work / "resume-other.zarr"
    convert(run, synth, out, "--chunk", 256)
    proc = run(["convert", synth, out, "--chunk", 512, "--resume"])
    assert proc.returncode == 1, describe(proc)
    assert "other options" in proc.stderr
    # Resuming a finished store with the same options rewrites it identically.
    before = tree(out)
    convert(run, synth, out, "--chunk", 256, "--resume")
    assert tree(out) == before


# ---- (f) slidepipe reads its own output --------------------------------------------------------


def test_reads_own_output(source, default_store, info, read_region, assert_same_pixels):
    out, _ = default_store(source)
    facts = info(out)
    assert facts["format"] == "ome-zarr"
    src_facts = info(source)
    w, h = src_facts["levels"][0]["width"], src_facts["levels"][0]["height"]
    assert (facts["levels"][0]["width"], facts["levels"][0]["height"]) == (w, h)
    levels = levels_yxc(out)
    assert len(facts["levels"]) == len(levels)
    for x, y, rw, rh in [(0, 0, w, h), (w - 300, h - 200, 400, 300)]:
        got = read_region(out, 0, x, y, rw, rh)
        want = read_region(source, 0, x, y, rw, rh)
        assert_same_pixels(got, want, f"store vs source region ({x}, {y}, {rw}, {rh})")
    for k in range(1, len(levels)):
        lh, lw = levels[k].shape[:2]
        got = read_region(out, k, 0, 0, lw, lh)
        assert_same_pixels(got[..., :3], levels[k], f"store level {k} through slidepipe")


# ---- (g) errors ---------------------------------------------------------------------------------


def one_line_error(proc) -> str:
    lines = proc.stderr.splitlines()
    assert lines and lines[0].startswith("slidepipe: "), describe(proc)
    return lines[0]


def test_existing_output_needs_resume(synth, run, work, default_store):
    out, _ = default_store(synth)
    proc = run(["convert", synth, out])
    assert proc.returncode == 1, describe(proc)
    assert len(proc.stderr.splitlines()) == 1
    assert "exists" in one_line_error(proc) and "--resume" in proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--shard", "2"],
        ["--shard", "2", "--format", "ome-zarr-0.4"],
        ["--chunk", "100"],
        ["--chunk", "5000"],
        ["--codec", "lzma"],
        ["--format", "ome-zarr-0.3"],
        ["--layout", "xyc"],
        ["--level", "10", "--codec", "gzip"],
        ["--threads", "-1"],
        ["--bogus"],
    ],
    ids=lambda a: " ".join(a),
)
def test_usage_errors(synth, run, work, args):
    out = work / "never.zarr"
    proc = run(["convert", synth, out, *args])
    assert proc.returncode == 2, describe(proc)
    one_line_error(proc)
    assert not out.exists()


def test_verify_errors(run, work, synth):
    proc = run(["verify", work / "no-such.zarr"])
    assert proc.returncode == 1, describe(proc)
    one_line_error(proc)
    proc = run(["verify"])
    assert proc.returncode == 2


def test_disk_full(synth, run, tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                           capture_output=True, text=True)
    if mount.returncode != 0:
        reason = f"cannot mount a 2 MiB tmpfs here ({mount.stderr.strip()})"
        print(reason)
        pytest.skip(reason)
    try:
        out = mnt / "out.zarr"
        proc = run(["convert", synth, out, "--threads", 2])
        assert proc.returncode == 1, describe(proc)
        assert "No space left" in one_line_error(proc)
        import numcodecs

        chunks = chunk_files(out)
        assert chunks, "some chunks fitted before the disk was full"
        for p in chunks:
            raw = numcodecs.Zstd().decode(p.read_bytes())
            assert len(raw) == 3 * 512 * 512, p
        assert not [p for p in out.rglob("*") if ".tmp-" in p.name]
        assert not (out / "slidepipe-complete").exists()
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


# ---- progress ------------------------------------------------------------------------------------


def test_progress_only_on_a_terminal(synth, slidepipe_bin, work):
    import pty

    master, slave = pty.openpty()
    out = work / "progress.zarr"
    try:
        proc = subprocess.Popen([str(slidepipe_bin), "convert", str(synth), str(out), "--chunk", "256"],
                                stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=120)
    finally:
        os.close(master)
    assert proc.returncode == 0
    text = b"".join(chunks).decode("utf-8", "replace")
    assert "100.0%" in text and "chunks" in text and "MP/s" in text and "ETA" in text, text
    assert text.endswith("\n") or text.endswith("\r\n")
