"""The pixel hash (docs/pixel-hash.md): `slidepipe hash`, the hash convert and process record in a
store, and verify's check of it.

Oracles: an independent implementation of the definition in numpy + hashlib over level arrays that
tifffile (a deflate TIFF) and zarr-python (a converted store) decode, so slidepipe's reader is not
its own reference; stores of one slide written with every lossless codec, several chunk sizes,
codec levels, both Zarr formats and both layouts, which must share one pixel hash while their
dataset hashes all differ; a store renamed; a store whose chunk zarr-python re-encoded with one
pixel changed, with and without a regenerated manifest (only the pixel hash can catch the
latter); 1, 2 and 3 threads.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

import conftest
from conftest import describe

TESTDATA = conftest.testdata_dir()
SMALL = "aperio/CMU-1-Small-Region.svs"  # 2220 x 2967: edge blocks of 172 and 151 pixels
BOXES = "generic-tiff/boxes.tiff"  # 4 deflate levels, 300 x 250 down to 37 x 31
HEX64 = r"[0-9a-f]{64}"


def need(rel: str) -> Path:
    path = TESTDATA / rel
    if not path.is_file():
        pytest.skip(f"{rel} not in the shared test data")
    return path


# ---- the definition, independently ------------------------------------------------------------


def reference_pixel_hash(levels: list[np.ndarray]) -> str:
    """docs/pixel-hash.md over (height, width, 3) uint8 arrays, level 0 first."""
    top = hashlib.sha256(b"slidepipe-pixels-v1" + struct.pack("<I", len(levels)))
    for a in levels:
        assert a.dtype == np.uint8 and a.ndim == 3 and a.shape[2] == 3
        h, w = a.shape[:2]
        level = hashlib.sha256(struct.pack("<QQ", w, h))
        for y in range(0, h, 256):
            for x in range(0, w, 256):
                block = np.ascontiguousarray(a[y : y + 256, x : x + 256])
                level.update(hashlib.sha256(block.tobytes()).digest())
        top.update(level.digest())
    return top.hexdigest()


def store_levels(path: Path) -> list[np.ndarray]:
    """A converted store's levels as (y, x, c) arrays, read by zarr-python."""
    zarr = pytest.importorskip("zarr")
    g = zarr.open_group(str(path), mode="r")
    ms = g.attrs["ome"]["multiscales"][0] if "ome" in g.attrs else g.attrs["multiscales"][0]
    names = [a["name"] for a in ms["axes"]]
    out = []
    for ds in ms["datasets"]:
        a = np.asarray(g[ds["path"]][...])
        out.append(a.transpose(1, 2, 0) if names == ["c", "y", "x"] else a)
    return out


# ---- running the command ----------------------------------------------------------------------


def pixel_hash(run, path, *args) -> str:
    proc = run(["hash", path, "--json", *args], timeout=300)
    assert proc.returncode == 0, describe(proc)
    assert proc.stderr == "", f"quiet when stderr is not a terminal\n{describe(proc)}"
    doc = json.loads(proc.stdout)
    assert doc["definition"] == "slidepipe-pixels-v1"
    assert isinstance(doc["levels"], int) and doc["seconds"] >= 0
    text = run(["hash", path, *args], timeout=300)
    assert text.returncode == 0 and text.stdout == f"pixel_hash {doc['pixel_hash']}\n", describe(text)
    return doc["pixel_hash"]


def convert(run, slide, out, *args) -> str:
    proc = run(["convert", slide, out, "--json", *args], timeout=300)
    assert proc.returncode == 0, describe(proc)
    return json.loads(proc.stdout)["dataset_hash"]


def verify(run, store) -> tuple[int, dict]:
    proc = run(["verify", store, "--json"], timeout=300)
    assert proc.returncode in (0, 1), describe(proc)
    return proc.returncode, json.loads(proc.stdout)


def recorded(info, store) -> str:
    doc = info(store)
    assert doc["properties"]["slidepipe.pixel-hash"] == doc["pixel_hash"]
    return doc["pixel_hash"]


# ---- the tests --------------------------------------------------------------------------------


def test_reference_over_tifffile_levels(run):
    """slidepipe's hash of a deflate TIFF equals the definition over tifffile's decoding."""
    tifffile = pytest.importorskip("tifffile")
    path = need(BOXES)
    with tifffile.TiffFile(path) as t:
        levels = [p.asarray() for p in t.pages]
    assert [a.shape[:2] for a in levels] == [(250, 300), (125, 150), (62, 75), (31, 37)]
    assert pixel_hash(run, path) == reference_pixel_hash(levels)


def test_reference_over_zarr_levels(run, info, tmp_path):
    """Many blocks, edge blocks cut to the level, five levels: the recorded hash, `slidepipe
    hash` of the store and the definition over zarr-python's arrays agree."""
    store = tmp_path / "small.zarr"
    convert(run, need(SMALL), store, "--chunk", "384")
    levels = store_levels(store)
    assert levels[0].shape == (2967, 2220, 3) and len(levels) >= 4
    want = reference_pixel_hash(levels)
    assert recorded(info, store) == want
    assert pixel_hash(run, store) == want
    # Level 0 of the store is the slide's level 0, and the slide has one level: a one-level store
    # of it shares the slide's pixel hash.
    assert pixel_hash(run, need(SMALL)) == reference_pixel_hash(levels[:1])
    one = tmp_path / "one.zarr"
    convert(run, need(SMALL), one, "--levels", "1", "--codec", "gzip")
    assert recorded(info, one) == pixel_hash(run, need(SMALL))


# Every lossless codec, chunk sizes that do and do not divide the 256-pixel block grid, codec
# levels, both formats (one sharded), both layouts. --levels 4 fixes the pyramid's depth, which
# the automatic depth would take from the chunk size.
VARIANTS = [
    ["--codec", "zstd", "--chunk", "256"],
    ["--codec", "zstd", "--chunk", "512", "--level", "9"],
    ["--codec", "gzip", "--chunk", "300", "--level", "1"],
    ["--codec", "blosc-lz4", "--chunk", "1000", "--layout", "yxc"],
    ["--codec", "blosc-zstd", "--chunk", "384", "--format", "ome-zarr-0.5"],
    ["--codec", "none", "--chunk", "256", "--format", "ome-zarr-0.5", "--shard", "2"],
]


def test_codecs_chunks_and_formats_share_one_pixel_hash(run, info, tmp_path):
    slide = need(SMALL)
    pixels, datasets = set(), set()
    for i, args in enumerate(VARIANTS):
        store = tmp_path / f"v{i}.zarr"
        datasets.add(convert(run, slide, store, "--levels", "4", *args))
        got = recorded(info, store)
        assert pixel_hash(run, store) == got, args
        pixels.add(got)
    assert len(pixels) == 1, "the pixel hash must not depend on codec, chunk, level or format"
    assert len(datasets) == len(VARIANTS), "the dataset hashes must all differ"


def test_renamed_store_keeps_its_pixel_hash(run, info, tmp_path):
    a = tmp_path / "first.zarr"
    convert(run, need(SMALL), a, "--chunk", "512")
    want = recorded(info, a)
    b = tmp_path / "renamed-elsewhere.zarr"
    shutil.move(a, b)
    assert pixel_hash(run, b) == want and recorded(info, b) == want
    code, doc = verify(run, b)
    assert code == 0 and doc["pixel_hash"] == want and doc["problems"] == []
    # A store converted from the store: other metadata, other dataset hash, same pixels.
    c = tmp_path / "again.zarr"
    convert(run, b, c, "--chunk", "512")
    assert recorded(info, c) == want


@pytest.mark.parametrize("threads", ["2", "3"])
def test_threads_do_not_change_the_hash(run, tmp_path, threads):
    synth = tmp_path / "synth.tif"
    proc = run(["synth", synth, "--size", "1300", "--seed", "5"])
    assert proc.returncode == 0, describe(proc)
    for slide in (synth, need(BOXES), need(SMALL)):
        assert pixel_hash(run, slide, "--threads", "1") == pixel_hash(run, slide, "--threads", threads)


def rewrite_manifest(store: Path) -> None:
    """Make the manifest and the marker vouch for the files as they now are (what a careless
    re-upload or a tool rewriting the store would leave)."""
    manifest = store / "slidepipe-manifest.sha256"
    lines = []
    for line in manifest.read_text().splitlines():
        rel = line[66:]
        lines.append(f"{hashlib.sha256((store / rel).read_bytes()).hexdigest()}  {rel}\n")
    text = "".join(lines)
    manifest.write_text(text)
    (store / "slidepipe-complete").write_text(hashlib.sha256(text.encode()).hexdigest() + "\n")


def test_one_changed_pixel_is_a_pixel_hash_problem(run, tmp_path):
    zarr = pytest.importorskip("zarr")
    store = tmp_path / "s.zarr"
    digest = convert(run, need(SMALL), store, "--chunk", "512")
    code, doc = verify(run, store)
    assert code == 0 and doc["intact"] and doc["problem_count"] == 0
    want = doc["pixel_hash"]
    assert doc["dataset_hash"] == digest and len(want) == 64

    a = zarr.open_array(str(store / "0"), mode="r+")
    value = int(a[1, 700, 900])
    a[1, 700, 900] = (value + 1) % 256  # re-encodes chunk 0/0/1/1 with zarr-python
    code, doc = verify(run, store)
    problems = {(p["path"], p["problem"]) for p in doc["problems"]}
    assert code == 1 and not doc["intact"]
    assert problems == {("0/0/1/1", "changed"), ("pixel_hash", "changed")}, problems
    assert doc["pixel_hash"] != want and doc["pixel_hash"] == pixel_hash(run, store)

    # The manifest regenerated over the changed chunk: only the pixel hash still sees it.
    rewrite_manifest(store)
    code, doc = verify(run, store)
    assert code == 1 and doc["problems"] == [{"path": "pixel_hash", "problem": "changed"}]
    proc = run(["verify", store])
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == ["changed pixel_hash",
                                        f"1 problem; dataset_hash {doc['dataset_hash']}",
                                        f"pixel_hash {doc['pixel_hash']}"], describe(proc)

    # Put the pixel back: the pixels hash as they did, whatever bytes the codec now wrote.
    a[1, 700, 900] = value
    rewrite_manifest(store)
    code, doc = verify(run, store)
    assert code == 0 and doc["pixel_hash"] == want


def test_process_records_the_pixel_hash_of_uint8_results(run, info, tmp_path):
    slide = need(SMALL)
    for op, args in (("grey", ["--chunk", "100"]), ("sobel", ["--dtype", "uint8", "--chunk", "700"])):
        store = tmp_path / f"{op}.zarr"
        proc = run(["process", slide, store, "--op", op, *args], timeout=300)
        assert proc.returncode == 0, describe(proc)
        got = recorded(info, store)
        assert pixel_hash(run, store) == got
        code, doc = verify(run, store)
        assert code == 0 and doc["pixel_hash"] == got
        zarr = pytest.importorskip("zarr")
        a = np.asarray(zarr.open_array(str(store / "0"), mode="r")[...])
        rgb = np.repeat(a, 3, axis=0) if a.shape[0] == 1 else a  # grey reads as R = G = B
        assert got == reference_pixel_hash([rgb.transpose(1, 2, 0)])
    # float32 results record none (the slide layer cannot read them) and verify on files alone.
    store = tmp_path / "float.zarr"
    proc = run(["process", slide, store, "--op", "sobel"], timeout=300)
    assert proc.returncode == 0, describe(proc)
    code, doc = verify(run, store)
    assert code == 0 and doc["pixel_hash"] is None
    assert "pixel_hash" not in run(["verify", store]).stdout


def test_usage_and_errors(run, tmp_path):
    assert run(["hash"]).returncode == 2
    assert run(["hash", need(BOXES), "--threads", "-1"]).returncode == 2
    assert run(["hash", need(BOXES), "--bogus"]).returncode == 2
    proc = run(["hash", tmp_path / "missing.svs"])
    assert proc.returncode == 1 and proc.stderr.startswith("slidepipe: "), describe(proc)
    proc = run(["hash", "--help"])
    assert proc.returncode == 0 and "slidepipe hash SLIDE" in proc.stdout
