"""The slidepipe command line's contract: exit codes, messages, output files and JSON.

DESIGN.md's CLI contract: exit 0 on success; 1 on a runtime error, with exactly one line on stderr
starting "slidepipe: "; 2 on a usage error (unknown command or option, missing argument, a value
that is not a valid number or is outside its allowed range) with a usage message on stderr.

Choice made here (docs/testing.md, "Exit codes"): a --level the slide does not have is a usage
error, exit 2, like a negative --width. The value of an option is out of its valid range
(0 .. level count - 1); that the range is only known once the slide is open does not make it a
problem of the data. An associated image name the slide lacks is a runtime error, exit 1: the
name is an operand, not a ranged option value, and the slide simply has no such content.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

imagecodecs = pytest.importorskip("imagecodecs", reason="imagecodecs decodes the PNG output")

SMALL_SVS = "aperio/CMU-1-Small-Region.svs"
BOXES = "generic-tiff/boxes.tiff"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# The thumbnail's mean colour may differ from OpenSlide's by this much per channel (0-255):
# different resampling filters over the same level (docs/testing.md, "Tolerances").
THUMBNAIL_MEAN_TOL = 3.0


def assert_usage_error(proc, what):
    assert proc.returncode == 2, f"{what}: expected exit 2 (usage error), got {proc.returncode}; stderr {proc.stderr!r}"
    assert proc.stderr.strip(), f"{what}: exit 2 without a usage message on stderr"
    assert "usage" in proc.stderr.lower(), f"{what}: stderr has no usage message: {proc.stderr!r}"


def assert_runtime_error(proc, what):
    assert proc.returncode == 1, f"{what}: expected exit 1 (runtime error), got {proc.returncode}; stderr {proc.stderr!r}"
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, f"{what}: stderr must be exactly one line, got {len(lines)}: {proc.stderr!r}"
    assert lines[0].startswith("slidepipe: "), f"{what}: stderr does not start with 'slidepipe: ': {lines[0]!r}"
    assert lines[0][len("slidepipe: "):].strip(), f"{what}: empty error message: {lines[0]!r}"


def decode_png(path: Path) -> np.ndarray:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path.name} is not a PNG (starts {data[:8]!r})"
    return imagecodecs.png_decode(data)


@pytest.fixture()
def small_svs(testdata) -> Path:
    path = testdata / SMALL_SVS
    if not path.is_file():
        pytest.skip(f"{SMALL_SVS} not found in {testdata}")
    return path


@pytest.fixture()
def boxes(testdata) -> Path:
    path = testdata / BOXES
    if not path.is_file():
        pytest.skip(f"{BOXES} not found in {testdata}")
    return path


# ---- usage errors (exit 2) ------------------------------------------------------------------

# Each case: (id, arguments after the binary). SLIDE stands for an existing slide, OUT for a
# writable output path ending in .rgba.
USAGE_CASES = [
    ("no-args", []),
    ("unknown-command", ["frobnicate"]),
    ("unknown-command-with-slide", ["frobnicate", "SLIDE"]),
    ("info-no-slide", ["info"]),
    ("info-unknown-option", ["info", "SLIDE", "--bogus"]),
    ("region-no-options", ["region", "SLIDE"]),
    ("region-missing-height", ["region", "SLIDE", "--level", "0", "--x", "0", "--y", "0", "--width", "8", "-o", "OUT"]),
    ("region-missing-output", ["region", "SLIDE", "--level", "0", "--x", "0", "--y", "0", "--width", "8", "--height", "8"]),
    ("region-option-without-value", ["region", "SLIDE", "--level", "0", "--x", "0", "--y", "0", "--width", "8", "-o", "OUT", "--height"]),
    ("region-x-not-a-number", ["region", "SLIDE", "--level", "0", "--x", "abc", "--y", "0", "--width", "8", "--height", "8", "-o", "OUT"]),
    ("region-x-trailing-garbage", ["region", "SLIDE", "--level", "0", "--x", "12abc", "--y", "0", "--width", "8", "--height", "8", "-o", "OUT"]),
    ("region-x-empty", ["region", "SLIDE", "--level", "0", "--x", "", "--y", "0", "--width", "8", "--height", "8", "-o", "OUT"]),
    ("region-y-overflow", ["region", "SLIDE", "--level", "0", "--x", "0", "--y", "99999999999999999999999", "--width", "8", "--height", "8", "-o", "OUT"]),
    ("region-width-negative", ["region", "SLIDE", "--level", "0", "--x", "0", "--y", "0", "--width", "-5", "--height", "8", "-o", "OUT"]),
    ("region-height-negative", ["region", "SLIDE", "--level", "0", "--x", "0", "--y", "0", "--width", "8", "--height", "-1", "-o", "OUT"]),
    ("region-level-negative", ["region", "SLIDE", "--level", "-1", "--x", "0", "--y", "0", "--width", "8", "--height", "8", "-o", "OUT"]),
    ("region-level-not-a-number", ["region", "SLIDE", "--level", "zero", "--x", "0", "--y", "0", "--width", "8", "--height", "8", "-o", "OUT"]),
    ("region-output-jpg", ["region", "SLIDE", "--level", "0", "--x", "0", "--y", "0", "--width", "8", "--height", "8", "-o", "OUT.jpg"]),
    ("region-output-no-extension", ["region", "SLIDE", "--level", "0", "--x", "0", "--y", "0", "--width", "8", "--height", "8", "-o", "OUT.noext"]),
    ("region-unknown-option", ["region", "SLIDE", "--level", "0", "--x", "0", "--y", "0", "--width", "8", "--height", "8", "-o", "OUT", "--bogus", "1"]),
    ("thumbnail-no-max-size", ["thumbnail", "SLIDE", "-o", "OUT.png"]),
    ("thumbnail-max-size-not-a-number", ["thumbnail", "SLIDE", "--max-size", "big", "-o", "OUT.png"]),
    ("thumbnail-no-output", ["thumbnail", "SLIDE", "--max-size", "64"]),
    ("associated-no-name", ["associated", "SLIDE", "-o", "OUT.png"]),
]


@pytest.mark.parametrize("args", [pytest.param(a, id=i) for i, a in USAGE_CASES])
def test_usage_error(args, run, small_svs, tmp_path):
    out = tmp_path / "out"
    argv = []
    for a in args:
        if a == "SLIDE":
            a = str(small_svs)
        elif a == "OUT":
            a = str(out) + ".rgba"
        elif a.startswith("OUT."):
            a = str(out) + a[3:].replace(".noext", "")
        argv.append(a)
    proc = run(argv, timeout=60)
    assert_usage_error(proc, f"slidepipe {' '.join(argv)}")
    assert not any(tmp_path.iterdir()), f"a usage error left files behind: {list(tmp_path.iterdir())}"


def test_region_level_out_of_range(run, small_svs, tmp_path, slide_facts):
    """A level the slide does not have is a usage error (2): an option value outside its range
    (the module docstring explains the choice). No output file may appear."""
    facts = slide_facts(SMALL_SVS)
    assert facts is not None, f"OpenSlide cannot open {SMALL_SVS}"
    count = len(facts["levels"])
    out = tmp_path / "o.rgba"
    for level in (count, count + 7, 2**31 - 1):
        proc = run(["region", small_svs, "--level", level, "--x", "0", "--y", "0",
                    "--width", "8", "--height", "8", "-o", out])
        assert_usage_error(proc, f"region --level {level} on a {count}-level slide")
        assert not out.exists(), f"--level {level}: a failed region left {out}"


# ---- runtime errors (exit 1) ----------------------------------------------------------------


def test_info_missing_file(run, tmp_path):
    missing = tmp_path / "no-such-slide.svs"
    assert_runtime_error(run(["info", missing]), "info on a missing file")
    assert_runtime_error(run(["info", missing, "--json"]), "info --json on a missing file")


def test_region_missing_file(run, tmp_path):
    proc = run(["region", tmp_path / "nope.tif", "--level", "0", "--x", "0", "--y", "0",
                "--width", "8", "--height", "8", "-o", tmp_path / "o.rgba"])
    assert_runtime_error(proc, "region on a missing file")


def test_info_not_a_slide(run, testdata):
    assert_runtime_error(run(["info", testdata / "README.md"]), "info on a Markdown file")


def test_info_directory(run, tmp_path):
    assert_runtime_error(run(["info", tmp_path]), "info on a directory")


def test_region_unwritable_output(run, small_svs, tmp_path):
    out = tmp_path / "no-such-dir" / "o.rgba"
    proc = run(["region", small_svs, "--level", "0", "--x", "0", "--y", "0",
                "--width", "8", "--height", "8", "-o", out])
    assert_runtime_error(proc, "region into a missing directory")


def test_associated_missing_name(run, small_svs, tmp_path):
    out = tmp_path / "x.png"
    proc = run(["associated", small_svs, "nosuchname", "-o", out])
    assert_runtime_error(proc, "associated nosuchname")
    assert "nosuchname" in proc.stderr, f"the message should name the missing image: {proc.stderr!r}"
    assert not out.exists(), "a failed associated read left an output file"


# ---- successful commands --------------------------------------------------------------------


def test_region_png_matches_rgba(run, read_region, small_svs, tmp_path):
    """A .png region is a valid RGBA PNG of the asked size with the same pixels as .rgba."""
    x, y, w, h = 517, 333, 301, 203
    out = tmp_path / "r.png"
    proc = run(["region", small_svs, "--level", "0", "--x", x, "--y", y,
                "--width", w, "--height", h, "-o", out])
    assert proc.returncode == 0, proc.stderr
    png = decode_png(out)
    assert png.shape == (h, w, 4) and png.dtype == np.uint8, f"PNG is {png.shape} {png.dtype}, expected ({h}, {w}, 4) uint8"
    raw = read_region(small_svs, 0, x, y, w, h)
    assert np.array_equal(png, raw), "PNG and raw RGBA outputs of the same region differ"
    assert (raw[..., 3] == 255).all(), "a region inside the slide must be opaque"


def test_region_outside_is_transparent(read_region, boxes):
    """A region wholly beyond the image is transparent black (0,0,0,0)."""
    arr = read_region(boxes, 0, 1000, 1000, 17, 9)
    assert arr.shape == (9, 17, 4)
    assert not arr.any(), f"pixels outside the image are not all zero: max {arr.max()}"


def test_thumbnail(run, small_svs, tmp_path):
    """--max-size 256: longer side 256, aspect preserved, mean colour close to OpenSlide's."""
    openslide = pytest.importorskip("openslide", reason="openslide-python is the oracle")
    out = tmp_path / "t.png"
    proc = run(["thumbnail", small_svs, "--max-size", "256", "-o", out])
    assert proc.returncode == 0, proc.stderr
    thumb = decode_png(out)
    assert thumb.ndim == 3 and thumb.shape[-1] == 4, f"thumbnail is {thumb.shape}, expected RGBA"
    slide = openslide.OpenSlide(str(small_svs))
    w0, h0 = slide.dimensions
    th, tw = thumb.shape[:2]
    assert max(tw, th) == 256, f"thumbnail is {tw}x{th}; longer side must be 256"
    if w0 >= h0:
        assert abs(th - 256 * h0 / w0) <= 1, f"{tw}x{th} does not keep the aspect of {w0}x{h0}"
    else:
        assert abs(tw - 256 * w0 / h0) <= 1, f"{tw}x{th} does not keep the aspect of {w0}x{h0}"
    assert (thumb[..., 3] == 255).all(), "the thumbnail of a fully covered slide must be opaque"
    ref = np.asarray(slide.get_thumbnail((256, 256)).convert("RGB"), dtype=np.float64)
    mine = thumb[..., :3].astype(np.float64)
    diff = np.abs(mine.reshape(-1, 3).mean(0) - ref.reshape(-1, 3).mean(0))
    assert (diff <= THUMBNAIL_MEAN_TOL).all(), (
        f"mean RGB {mine.reshape(-1, 3).mean(0).round(2).tolist()} vs OpenSlide's "
        f"{ref.reshape(-1, 3).mean(0).round(2).tolist()}: differs by {diff.round(2).tolist()} "
        f"(tolerance {THUMBNAIL_MEAN_TOL})"
    )


def test_thumbnail_other_sizes(run, boxes, tmp_path):
    """The longer side follows --max-size for a wide slide too."""
    for size in (64, 100):
        out = tmp_path / f"t{size}.png"
        proc = run(["thumbnail", boxes, "--max-size", size, "-o", out])
        assert proc.returncode == 0, proc.stderr
        thumb = decode_png(out)
        th, tw = thumb.shape[:2]
        assert tw == size, f"--max-size {size} on a 300x250 slide gave {tw}x{th}"
        assert abs(th - size * 250 / 300) <= 1, f"--max-size {size}: {tw}x{th} does not keep the aspect"


def test_info_text(run, boxes, slide_facts):
    """Human-readable info names the format, the level count and each level's size."""
    facts = slide_facts(BOXES)
    proc = run(["info", boxes])
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert facts["vendor"] in text, f"format {facts['vendor']!r} not in:\n{text}"
    n = len(facts["levels"])
    pattern = rf"(?i)(levels?(\s*count)?\W{{0,3}}\s*{n}\b|\b{n}\s+levels?\b)"
    assert re.search(pattern, text), f"level count {n} not stated (as 'levels: {n}' or '{n} levels') in:\n{text}"
    for w, h in facts["levels"]:
        assert re.search(rf"(?<!\d){w}(?!\d)", text) and re.search(rf"(?<!\d){h}(?!\d)", text), f"level size {w}x{h} not in:\n{text}"
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)  # plain text is not the JSON form


def _check_contract_json(doc, where):
    problems = []
    if not isinstance(doc, dict):
        return [f"top level is {type(doc).__name__}, not an object"]
    for key in ("format", "levels", "mpp_x", "mpp_y", "objective_power", "associated", "properties"):
        if key not in doc:
            problems.append(f"missing key {key!r}")
    if not (isinstance(doc.get("format"), str) and doc.get("format")):
        problems.append(f"format {doc.get('format')!r} is not a non-empty string")
    levels = doc.get("levels")
    if not (isinstance(levels, list) and levels):
        problems.append(f"levels {levels!r} is not a non-empty list")
        levels = []
    for i, lv in enumerate(levels):
        if not isinstance(lv, dict):
            problems.append(f"levels[{i}] is not an object")
            continue
        for key in ("width", "height", "tile_width", "tile_height"):
            v = lv.get(key)
            if not (isinstance(v, int) and not isinstance(v, bool) and v > 0):
                problems.append(f"levels[{i}].{key} = {v!r} is not a positive integer")
        ds = lv.get("downsample")
        if not (isinstance(ds, (int, float)) and not isinstance(ds, bool) and ds >= 1):
            problems.append(f"levels[{i}].downsample = {ds!r} is not a number >= 1")
        if not (isinstance(lv.get("compression"), str) and lv.get("compression")):
            problems.append(f"levels[{i}].compression = {lv.get('compression')!r} is not a name")
    if levels and isinstance(levels[0], dict) and levels[0].get("downsample") != 1:
        problems.append(f"levels[0].downsample = {levels[0].get('downsample')!r}, must be 1")
    for key in ("mpp_x", "mpp_y", "objective_power"):
        v = doc.get(key)
        if not (v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0)):
            problems.append(f"{key} = {v!r} is neither a positive number nor null")
    assoc = doc.get("associated")
    if not isinstance(assoc, dict):
        problems.append(f"associated {assoc!r} is not an object")
    else:
        for name, v in assoc.items():
            if not (isinstance(v, dict) and all(isinstance(v.get(k), int) and v.get(k) > 0 for k in ("width", "height"))):
                problems.append(f"associated[{name!r}] = {v!r} lacks positive width/height")
    props = doc.get("properties")
    if not isinstance(props, dict):
        problems.append(f"properties {props!r} is not an object")
    else:
        for k, v in props.items():
            if not isinstance(v, str):
                problems.append(f"properties[{k!r}] = {v!r} is not a string")
    return problems


def test_info_json_contract(contract_slide, testdata, run):
    """`info --json` on every aperio/ and generic-tiff/ file: one valid JSON object with every
    contract key of the right type; nothing on stderr (the library never prints)."""
    proc = run(["info", testdata / contract_slide, "--json"])
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr!r}"
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        pytest.fail(f"invalid JSON ({e}): {proc.stdout[:500]!r}")
    problems = _check_contract_json(doc, contract_slide)
    assert not problems, f"{contract_slide}:\n  " + "\n  ".join(problems)
    assert proc.stderr == "", f"info --json succeeded but wrote to stderr: {proc.stderr[:500]!r}"


def test_output_files_get_the_umask_mode(run, testdata, tmp_path):
    """Outputs are written through a private temporary file and renamed into place; the result
    must have the mode a plain create gives (0666 under the umask), not the temporary's 0600."""
    import os
    import stat

    mask = os.umask(0)
    os.umask(mask)
    slide = testdata / "aperio" / "CMU-1-Small-Region.svs"
    png = tmp_path / "r.png"
    assert run(["region", slide, "--level", 0, "--x", 0, "--y", 0, "--width", 8, "--height", 8,
                "-o", png]).returncode == 0
    js = tmp_path / "s.json"
    assert run(["spectrum", slide, "--json", js]).returncode == 0
    for f in (png, js):
        assert stat.S_IMODE(f.stat().st_mode) == 0o666 & ~mask, f


def test_properties_not_utf8_are_json_and_python(sp, tmp_path):
    """Property text from a file that is not well-formed UTF-8 (Latin-1, a lone surrogate, an
    overlong form, a code point past U+10FFFF) reaches `info --json` and the Python binding with
    each bad byte as '?', and well-formed multi-byte characters kept."""
    tifffile = pytest.importorskip("tifffile", reason="tifffile writes the TIFF")
    bad = b"caf\xe9 \xed\xa0\x80 \xc0\xaf \xf4\x90\x80\x80 \xc2\xb5m ok"
    path = tmp_path / "latin1.tif"
    tifffile.imwrite(path, np.zeros((32, 32, 3), np.uint8), tile=(16, 16), metadata=None,
                     description=bad)
    proc = sp.ok(["info", path, "--json"])
    text = json.loads(proc.stdout)["properties"]["tiff.ImageDescription"]
    assert text == "caf? ??? ?? ???? \u00b5m ok", text
    import subprocess
    import sys

    from conftest import binding_env
    code = (f"import slidepipe; print(repr(slidepipe.open({str(path)!r})"
            f".properties['tiff.ImageDescription']))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=binding_env(sp.binary, None), timeout=60)
    if run.returncode != 0 and "No module named 'slidepipe'" in run.stderr:
        pytest.skip(f"the Python binding is not importable here: {run.stderr.strip()[-200:]}")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == repr(text)
