"""What the vendor-format tests (test_philips.py, test_leica.py, test_ventana.py) check the same
way: a slide written in the vendor's layout that OpenSlide 4 must name as that vendor, properties
against OpenSlide's, the one-line error of a malformed file, a file cut in the middle of
level 0's tile data, and regions read against OpenSlide's."""

from __future__ import annotations

from pathlib import Path

import pytest

import vendor_samples


def generated_slide(testdata, tmp_path_factory, write, name: str, vendor: str) -> Path:
    """write(path, testdata) into a new folder; skips without the H&E source, and fails unless
    OpenSlide 4 reads the file as `vendor` (a generated file it cannot read does not count)."""
    import openslide

    if not (testdata / vendor_samples.H_AND_E).is_file():
        pytest.skip(f"{vendor_samples.H_AND_E} (the H&E pixels) is not in the shared test data")
    path = write(tmp_path_factory.mktemp(vendor) / name, testdata)
    with openslide.OpenSlide(str(path)) as slide:
        got = slide.properties.get("openslide.vendor")
    assert got == vendor, f"OpenSlide 4 reads the generated file as {got!r}, not {vendor}"
    return path


def assert_same_properties(want: dict, got: dict, numbers=()) -> None:
    """Every key on both sides, byte-equal values, except keys in `numbers`, which must read as
    the same double."""
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    differ = sorted(k for k in set(want) & set(got) if want[k] != got[k] and not (
        k in numbers and float(want[k]) == float(got[k])))
    assert not (missing or extra or differ), f"missing {missing}, extra {extra}, differing {differ}"


def assert_one_line_error(proc, path: Path, words: str = "") -> None:
    """Exit 1 and one line "slidepipe: ..." naming the file (and `words`)."""
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("slidepipe: "), proc.stderr
    assert str(path) in lines[0] and words in lines[0], lines[0]


def assert_truncated_fails_cleanly(slide: Path, tmp_path: Path, run, info) -> None:
    """The file cut in the middle of level 0's tile data: opening fails when a directory lies
    past the cut, else reading the whole of level 0 (whose later tiles are gone) does; either
    way exit 1 and one line naming the file and what lies beyond the end."""
    import tifffile

    path = tmp_path / ("truncated" + slide.suffix)
    data = slide.read_bytes()
    with tifffile.TiffFile(slide) as tif:
        level0 = max((p for p in tif.pages if p.is_tiled), key=lambda p: p.imagewidth)
        offsets = sorted(o for o in level0.dataoffsets if o)
    path.write_bytes(data[: offsets[len(offsets) // 2] + 10])
    proc = run(["info", path])
    if proc.returncode == 0:
        lv = info(path)["levels"][0]
        proc = run(["region", path, "--level", "0", "--x", "0", "--y", "0", "--width",
                    lv["width"], "--height", lv["height"], "-o", tmp_path / "r.rgba"])
    assert_one_line_error(proc, path, "beyond the end")


def edge_regions(oracle) -> list:
    """On every level: the whole level plus a margin, a region across tile borders, the
    bottom-right corner past the level's edge (into the stored padding)."""
    out = []
    for level, ((w, h), ds) in enumerate(zip(oracle.level_dimensions, oracle.level_downsamples)):
        ds = int(ds)
        out.append((level, 0, 0, w + 16, h + 16))
        out.append((level, 200 * ds, 180 * ds, 120, 140))
        out.append((level, (w - 50) * ds, (h - 30) * ds, 90, 70))
    return out


def assert_regions_equal(path, oracle, regions, read_region, assert_same_pixels) -> None:
    """Each (level, x, y, w, h) of `regions` read from `path` equals OpenSlide's read_region."""
    import numpy as np

    for level, x, y, w, h in regions:
        want = np.asarray(oracle.read_region((x, y), level, (w, h)), dtype=np.uint8)
        got = read_region(path, level, x, y, w, h)
        assert_same_pixels(got, want, f"level {level} at ({x}, {y}) {w}x{h}")
