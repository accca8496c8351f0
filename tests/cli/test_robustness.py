"""No input crashes slidepipe, hangs it or makes it print garbage.

Two parts. First, every test-data file that the OpenSlide oracle does not cover (robustness/,
ome-tiff/, qptiff/, strip-tiff/, dicom/, and any aperio/ or generic-tiff/ file OpenSlide 4 cannot
open) goes through `info`, `info --json`, `region` (256x256 at the origin) and `thumbnail`.
Second, seeded mutants of three small real slides (byte flips in the first 64 KiB and in the TIFF
directories, truncations, zeroed ranges) go through `info` and `region`.

For a valid command line the only acceptable outcomes are exit 0 (it read the file) or exit 1
(it refused it, with exactly one line on stderr starting "slidepipe: "). A signal, a timeout, a
sanitizer report, exit 2 (it is not a usage error) or any other code fails the test. Timeouts
are hang detectors only, set far above any normal run, so a slow sanitizer build passes too.
"""

from __future__ import annotations

import concurrent.futures
import json
import random
import signal
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

imagecodecs = pytest.importorskip("imagecodecs", reason="imagecodecs decodes the PNG output")

TIMEOUT_S = 20  # per command; a normal run takes well under a second
REGION = 256
MUTANTS = 300  # in all, split evenly between the base slides
MUTATION_SEED = 20250601
MUTATION_BASES = (
    "aperio/CMU-1-Small-Region.svs",
    "generic-tiff/boxes.tiff",
    "ndpi/test3-DAPI-2-387.ndpi",
)
# The mutants' region: wide and tall enough to decode every tile whose data lie in the first
# 64 KiB of each base (CMU-1-Small-Region stores its 240x240 tiles row by row, ten to a row,
# from offset 16; boxes.tiff is 300x250 in all; the NDPI's first 64 KiB hold level 0's JPEG
# header and its first 30 restart intervals, 3968x8 pixels each), so byte flips there reach the
# decoders and the NDPI header parser.
MUTANT_REGION = (2304, 480)


def _run(sp, args, timeout=TIMEOUT_S):
    """Run slidepipe; returns (CompletedProcess or None, problem or None). Never raises."""
    try:
        proc = subprocess.run(
            [str(sp.binary), *map(str, args)],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s (hang?)"
    return proc, _outcome_problem(sp, proc)


def _outcome_problem(sp, proc) -> str | None:
    rc = proc.returncode
    cmd = " ".join(map(str, proc.args[1:]))
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return f"`{cmd}` killed by {name}; stderr {proc.stderr[-800:]!r}"
    line = sp.sanitizer_report(proc.stderr)
    if line is not None:
        return f"`{cmd}` sanitizer report (exit {rc}): {line}"
    if rc == 2:
        return f"`{cmd}` exit 2 (usage error) for a valid command line; stderr {proc.stderr!r}"
    if rc not in (0, 1):
        return f"`{cmd}` exit {rc}, expected 0 or 1; stderr {proc.stderr[-800:]!r}"
    if rc == 1:
        lines = proc.stderr.splitlines()
        if len(lines) != 1 or not lines[0].startswith("slidepipe: ") or not lines[0][11:].strip():
            return f"`{cmd}` exit 1 must print one line 'slidepipe: MESSAGE' on stderr, got {proc.stderr[-800:]!r}"
    return None


def _region_args(path, out, w=REGION, h=REGION):
    return ["region", path, "--level", 0, "--x", 0, "--y", 0, "--width", w, "--height", h, "-o", out]


# ---- every file the oracles do not cover ----------------------------------------------------


def test_file_is_handled(robust_slide, testdata, sp, tmp_path):
    path = testdata / robust_slide
    problems = []

    info_txt, p = _run(sp, ["info", path])
    problems += [p] if p else []
    info_json, p = _run(sp, ["info", path, "--json"])
    problems += [p] if p else []
    if info_json is not None and info_json.returncode == 0:
        try:
            doc = json.loads(info_json.stdout)
            if not isinstance(doc, dict) or not doc.get("levels"):
                problems.append(f"info --json succeeded without levels: {info_json.stdout[:300]!r}")
        except json.JSONDecodeError as e:
            problems.append(f"info --json exit 0 but invalid JSON ({e}): {info_json.stdout[:300]!r}")
    if info_txt is not None and info_json is not None and info_txt.returncode != info_json.returncode:
        problems.append(
            f"info exits {info_txt.returncode} but info --json exits {info_json.returncode}: "
            "both open the same file"
        )

    out = tmp_path / "r.rgba"
    proc, p = _run(sp, _region_args(path, out))
    problems += [p] if p else []
    if proc is not None and proc.returncode == 0:
        size = out.stat().st_size if out.exists() else None
        if size != REGION * REGION * 4:
            problems.append(f"region exit 0 but wrote {size} bytes, expected {REGION * REGION * 4}")

    thumb = tmp_path / "t.png"
    proc, p = _run(sp, ["thumbnail", path, "--max-size", 256, "-o", thumb])
    problems += [p] if p else []
    if proc is not None and proc.returncode == 0:
        try:
            img = imagecodecs.png_decode(thumb.read_bytes())
            if img.ndim != 3 or img.shape[-1] != 4 or max(img.shape[:2]) > 256:
                problems.append(f"thumbnail exit 0 but the PNG is {img.shape}, expected RGBA <= 256")
        except Exception as e:  # a missing or undecodable file
            problems.append(f"thumbnail exit 0 but no valid PNG: {e}")

    assert not problems, f"{robust_slide}:\n  " + "\n  ".join(problems)


# ---- mutants of real slides -----------------------------------------------------------------


def _ifd_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) byte spans of the TIFF directories in `data`, following the IFD chain
    (at most 64 directories, stopping at anything out of range)."""
    if len(data) < 16 or data[:2] not in (b"II", b"MM"):
        return []
    e = "<" if data[:2] == b"II" else ">"
    (magic,) = struct.unpack(e + "H", data[2:4])
    big = magic == 43
    spans = []
    off = struct.unpack(e + "Q", data[8:16])[0] if big else struct.unpack(e + "I", data[4:8])[0]
    seen = set()
    while off and off not in seen and len(spans) < 64:
        seen.add(off)
        head = 8 if big else 2
        if off + head > len(data):
            break
        n = struct.unpack(e + ("Q" if big else "H"), data[off:off + head])[0]
        entry = 20 if big else 12
        end = off + head + n * entry + (8 if big else 4)
        if end > len(data) or n > 4096:
            break
        spans.append((off, end))
        nxt = data[end - (8 if big else 4):end]
        off = struct.unpack(e + ("Q" if big else "I"), nxt)[0]
    return spans


def _mutate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One corrupted copy of `data` and a description of what was done."""
    buf = bytearray(data)
    head = min(len(buf), 64 * 1024)
    spans = _ifd_spans(data)
    kind = rng.choice(["flip", "flip", "ifd-flip", "truncate", "zero"])
    if kind == "ifd-flip" and not spans:
        kind = "flip"
    if kind == "flip":
        n = rng.randint(1, 16)
        offsets = sorted(rng.randrange(head) for _ in range(n))
        for o in offsets:
            buf[o] ^= rng.randint(1, 255)
        return bytes(buf), f"flip {n} bytes in the first 64 KiB at {offsets}"
    if kind == "ifd-flip":
        start, end = rng.choice(spans)
        n = rng.randint(1, 4)
        offsets = sorted(rng.randrange(start, end) for _ in range(n))
        for o in offsets:
            buf[o] ^= rng.randint(1, 255)
        return bytes(buf), f"flip {n} bytes in the IFD at {start}..{end}: {offsets}"
    if kind == "truncate":
        length = rng.randrange(len(buf))
        return bytes(buf[:length]), f"truncate to {length} of {len(buf)} bytes"
    # zero a range, in the first 64 KiB or over a directory
    if spans and rng.random() < 0.5:
        start, end = rng.choice(spans)
        o = rng.randrange(start, end)
    else:
        o = rng.randrange(head)
    length = rng.randint(1, 4096)
    buf[o:o + length] = bytes(len(buf[o:o + length]))
    return bytes(buf), f"zero {length} bytes at {o}"


def _check_mutant(sp, path: Path, label: str) -> list[str]:
    problems = []
    _, p = _run(sp, ["info", path])
    if p:
        problems.append(f"{label}: {p}")
    out = path.with_suffix(".rgba")
    w, h = MUTANT_REGION
    proc, p = _run(sp, _region_args(path, out, w, h))
    if p:
        problems.append(f"{label}: {p}")
    elif proc.returncode == 0:
        size = out.stat().st_size if out.exists() else None
        if size != w * h * 4:
            problems.append(f"{label}: region exit 0 wrote {size} bytes, expected {w * h * 4}")
    if out.exists():
        out.unlink()
    return problems


def test_mutants(testdata, sp, tmp_path):
    bases = [testdata / rel for rel in MUTATION_BASES]
    for b in bases:
        if not b.is_file():
            pytest.skip(f"mutation base {b} not found")
    originals = [b.read_bytes() for b in bases]

    def one(i: int) -> list[str]:
        k = i % len(bases)
        data, what = _mutate(originals[k], random.Random(MUTATION_SEED * 1000 + i))
        path = tmp_path / f"mutant-{i:03d}{bases[k].suffix}"
        path.write_bytes(data)
        problems = _check_mutant(sp, path, f"mutant {i} of {bases[k].name} ({what}) -> {path}")
        if not problems:
            path.unlink()  # keep only the mutants that failed, for reproduction
        return problems

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        failures = [p for problems in pool.map(one, range(MUTANTS)) for p in problems]
    assert not failures, f"{len(failures)} problems in {MUTANTS} mutants:\n  " + "\n  ".join(failures[:15])


def test_mutations_are_deterministic():
    """The same seed gives the same mutants (so a failure can be reproduced)."""
    data = bytes(range(256)) * 64
    a = [_mutate(data, random.Random(MUTATION_SEED * 1000 + i)) for i in range(20)]
    b = [_mutate(data, random.Random(MUTATION_SEED * 1000 + i)) for i in range(20)]
    assert a == b
    assert any(m != data for m, _ in a)


# ---- work bounded by the input ----------------------------------------------------------------

HUGE_TILE = 16000  # pixels a side: one JPEG tile under the default tile limit (2^28 pixels)
PEAK_RSS_BOUND_MIB = 512  # what a run may take here, sanitizer builds included (docs/reading.md)


def _one_huge_jpeg_tile(path: Path) -> None:
    """A TIFF of a few KiB whose one tile is a 16000x16000 JPEG: a 16x16 image's stream with its
    frame size set to 16000x16000, so the decoder pads all but the first MCUs (a damaged but
    decodable stream). Reading it must cost one decode of the tile, not one per output band."""
    jpeg = bytearray(imagecodecs.jpeg8_encode(np.full((16, 16, 3), 200, np.uint8), level=90))
    sof = jpeg.index(b"\xff\xc0")
    struct.pack_into(">HH", jpeg, sof + 5, HUGE_TILE, HUGE_TILE)
    n = 12
    bps_at = 8 + 2 + n * 12 + 4
    data_at = bps_at + 6
    entries = [
        (256, 4, 1, HUGE_TILE),  # ImageWidth
        (257, 4, 1, HUGE_TILE),  # ImageLength
        (258, 3, 3, bps_at),  # BitsPerSample 8, 8, 8
        (259, 3, 1, 7),  # Compression JPEG
        (262, 3, 1, 6),  # Photometric YCbCr
        (277, 3, 1, 3),  # SamplesPerPixel
        (284, 3, 1, 1),  # PlanarConfiguration contiguous
        (322, 4, 1, HUGE_TILE),  # TileWidth
        (323, 4, 1, HUGE_TILE),  # TileLength
        (324, 4, 1, data_at),  # TileOffsets
        (325, 4, 1, len(jpeg)),  # TileByteCounts
        (530, 3, 2, 2 | 2 << 16),  # YCbCrSubSampling 2, 2
    ]
    assert len(entries) == n
    out = bytearray(b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", n))
    for tag, typ, count, value in entries:
        out += struct.pack("<HHII", tag, typ, count, value)
    out += struct.pack("<I", 0) + struct.pack("<HHH", 8, 8, 8) + jpeg
    path.write_bytes(bytes(out))


# Runs a command and reports its exit status and peak resident memory. A small interpreter of its
# own starts slidepipe: Linux counts the memory of the process that forks into a child's peak,
# and the test process itself may hold a gigabyte by the end of a suite.
_MEASURE = """
import resource, subprocess, sys
limit, report, cmd = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
try:
    rc = subprocess.run(cmd, stdin=subprocess.DEVNULL, timeout=limit).returncode
except subprocess.TimeoutExpired:
    rc = "timeout"
with open(report, "w") as f:
    f.write(f"{rc} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}")
"""


def _run_measured(sp, args, limit_s, tmp_path):
    """Run slidepipe, killed after limit_s (a hang detector); returns (the outcome's problem or
    None, the run's peak resident memory in MiB)."""
    cmd = [str(sp.binary), *map(str, args)]
    report = tmp_path / "measured"
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(limit_s), str(report), *cmd],
        capture_output=True,
        text=True,
        errors="replace",
    )
    rc, rss_kib = report.read_text().split()
    if rc == "timeout":
        return f"`{args[0]}` killed after {limit_s} s (work not bounded by the input?)", 0.0
    done = subprocess.CompletedProcess(cmd, int(rc), proc.stdout, proc.stderr)
    return _outcome_problem(sp, done), int(rss_kib) / 1024


def _bounded_problems(sp, runs, limit_s, bound_mib, tmp_path):
    """Run each command measured; the problems: a bad outcome, a kill, a peak over bound_mib."""
    problems = []
    for args in runs:
        problem, rss = _run_measured(sp, args, limit_s, tmp_path)
        if problem:
            problems.append(problem)
        elif rss > bound_mib:
            problems.append(f"`{args[0]}` peaked at {rss:.0f} MiB (bound {bound_mib} MiB)")
    return problems


def test_one_huge_jpeg_tile(sp, tmp_path):
    """A small file whose one 16000x16000 JPEG tile is larger than the tile cache: info, a region
    and a thumbnail each decode what they need of the tile once (the thumbnail at 1/8 scale), so
    they finish at the speed of one decode in memory bounded by one band of tile rows, not by
    the image. Times are not asserted (the hang detector is generous); memory is."""
    path = tmp_path / "one-huge-jpeg-tile.tif"
    _one_huge_jpeg_tile(path)
    runs = (
        ["info", path],
        _region_args(path, tmp_path / "r.rgba"),
        ["thumbnail", path, "--max-size", 256, "-o", tmp_path / "t.png"],
    )
    problems = _bounded_problems(sp, runs, TIMEOUT_S * 3, PEAK_RSS_BOUND_MIB, tmp_path)
    assert not problems, f"{path.stat().st_size}-byte TIFF:\n  " + "\n  ".join(problems)
    thumb = imagecodecs.png_decode((tmp_path / "t.png").read_bytes())
    assert thumb.shape == (256, 256, 4), f"thumbnail of a square slide is {thumb.shape}"


STREAM_RSS_BOUND_MIB = 1536  # a band of whole tile rows (768 MiB as RGB here) and the chunks around it


def test_one_huge_jpeg_tile_streamed_once(sp, tmp_path):
    """The same file through the tile engine: `convert` (the whole pyramid) and `process` read the
    level in bands of whole tile rows when its tiles are too large for the cache, so the tile is
    decoded once, not once per chunk (before: over 300 s for convert). Memory is one band of tile
    rows, bounded by the input's own tile size (docs/reading.md); times are not asserted. The
    pyramid's chunks must hold the tile's pixels: the decoded JPEG is uniform grey-ish 200 in its
    first 16x16 and padding elsewhere, so level 0's first chunk equals a region read of it."""
    path = tmp_path / "one-huge-jpeg-tile.tif"
    _one_huge_jpeg_tile(path)
    runs = (
        ["convert", path, tmp_path / "c.zarr", "--threads", 2],
        ["process", path, tmp_path / "p.zarr", "--op", "sobel", "--threads", 2],
    )
    problems = _bounded_problems(sp, runs, TIMEOUT_S * 6, STREAM_RSS_BOUND_MIB, tmp_path)
    assert not problems, f"{path.stat().st_size}-byte TIFF:\n  " + "\n  ".join(problems)
    zarr = pytest.importorskip("zarr", reason="zarr-python reads the converted store")
    level0 = zarr.open_group(str(tmp_path / "c.zarr"), mode="r")["0"]
    assert level0.shape == (3, HUGE_TILE, HUGE_TILE)
    done = sp.run(_region_args(path, tmp_path / "r.rgba", 512, 512))
    assert done.returncode == 0, done.stderr
    region = np.fromfile(tmp_path / "r.rgba", np.uint8).reshape(512, 512, 4)[..., :3]
    np.testing.assert_array_equal(np.moveaxis(level0[:, :512, :512], 0, -1), region)
