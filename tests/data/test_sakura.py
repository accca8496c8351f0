"""Sakura SVSlide against OpenSlide 4 on a database written here in Sakura's layout
(sakura_writer.py): three levels (downsamples 1, 2, 4) of 256-pixel tiles stored as one greyscale
JPEG per channel, an image size that is a multiple of neither, a label, a macro and a thumbnail.
OpenSlide 4.0.1 must call it "sakura"; then the levels, the sakura.* properties, MPP and
objective, the pixels of regions on every level (across tile borders and past the edge) and the
associated images must equal OpenSlide's exactly. Malformed databases (a missing table, a tile
that is not JPEG, a tile with a channel missing, a bad tile id, a huge declared size) fail with
exit 1 and one line naming the file, or read as OpenSlide reads them."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

import numpy as np
import pytest

openslide = pytest.importorskip("openslide", reason="openslide-python + openslide-bin are the oracle")
pytest.importorskip("PIL", reason="Pillow encodes the JPEG channels")
imagecodecs = pytest.importorskip("imagecodecs", reason="imagecodecs decodes the PNG output")

import sakura_writer  # noqa: E402  (tests/data, beside this file)
import vendor_checks  # noqa: E402

T = sakura_writer.SAKURA_TABLE


@pytest.fixture(scope="module")
def sakura(testdata, tmp_path_factory) -> Path:
    return vendor_checks.generated_slide(testdata, tmp_path_factory, sakura_writer.write_sakura,
                                         "slide.svslide", "sakura")


@pytest.fixture(scope="module")
def oracle(sakura):
    with openslide.OpenSlide(str(sakura)) as slide:
        yield slide


def _edit(src: Path, dst: Path, sql: str, params=()) -> Path:
    shutil.copy(src, dst)
    db = sqlite3.connect(dst)
    db.execute(sql, params)
    db.commit()
    db.close()
    return dst


def test_facts_equal_openslides(sakura, oracle, info):
    got = info(sakura)
    assert got["format"] == "sakura"
    want_levels = [
        {"width": w, "height": h, "downsample": ds,
         "tile_width": int(oracle.properties[f"openslide.level[{i}].tile-width"]),
         "tile_height": int(oracle.properties[f"openslide.level[{i}].tile-height"])}
        for i, ((w, h), ds) in enumerate(zip(oracle.level_dimensions, oracle.level_downsamples))
    ]
    got_levels = [{k: lv[k] for k in want_levels[0]} for lv in got["levels"]]
    assert got_levels == want_levels
    # Level sizes are the image's divided by the downsample, rounded down: 1003 / 4 = 250.
    assert [(lv["width"], lv["height"]) for lv in got_levels] == [(1003, 761), (501, 380),
                                                                  (250, 190)]
    assert got["mpp_x"] == float(oracle.properties["openslide.mpp-x"])
    assert got["mpp_y"] == float(oracle.properties["openslide.mpp-y"])
    assert got["objective_power"] == float(oracle.properties["openslide.objective-power"])
    want_assoc = {n: {"width": im.size[0], "height": im.size[1]}
                  for n, im in oracle.associated_images.items()}
    assert got["associated"] == want_assoc and set(want_assoc) == {"label", "macro", "thumbnail"}


# Numbers slidepipe writes the shortest way that reads back exactly, where OpenSlide prints 17
# digits: equal as doubles.
NUMBERS = {"sakura.ResolutionMmPerPix", "sakura.NominalLensMagnification"}


def test_properties_equal_openslides(sakura, oracle, info):
    want = {k: v for k, v in oracle.properties.items() if not k.startswith("openslide.")}
    got = {k: v for k, v in info(sakura)["properties"].items() if not k.startswith("slidepipe.")}
    assert len(want) == 11, f"OpenSlide reports {len(want)} sakura properties: {sorted(want)}"
    vendor_checks.assert_same_properties(want, got, NUMBERS)


def test_regions_equal_openslides(sakura, oracle, read_region, assert_same_pixels):
    """Both decode each channel with libjpeg-turbo's default IDCT: no difference allowed."""
    vendor_checks.assert_regions_equal(sakura, oracle, vendor_checks.edge_regions(oracle),
                                       read_region, assert_same_pixels)


def test_associated_equal_openslides(sakura, oracle, run, assert_same_pixels):
    for name, image in oracle.associated_images.items():
        want = np.asarray(image, dtype=np.uint8)
        with tempfile.TemporaryDirectory(prefix="sp-sakura-") as tmp:
            out = Path(tmp) / f"{name}.png"
            proc = run(["associated", sakura, name, "-o", out])
            assert proc.returncode == 0, proc.stderr
            got = imagecodecs.png_decode(out.read_bytes())
        assert_same_pixels(got, want, f"associated {name}")


def test_remote_slide_reads_as_local(sakura, tmp_path, info, read_region, assert_same_pixels):
    """Over HTTP (nginx on loopback): SQLite reads the database through the byte source, so the
    remote slide gives the local file's facts and pixels."""
    import shutil as _shutil

    if not (_shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        pytest.skip("needs nginx (apt-get install nginx-light) to serve the slide on loopback")
    from loopback import start_nginx

    proc, port = start_nginx(str(sakura.parent), str(tmp_path))
    try:
        url = f"http://127.0.0.1:{port}/{sakura.name}"
        assert info(url) == info(sakura)
        got = read_region(url, 1, 300, 260, 300, 200)
        assert_same_pixels(got, read_region(sakura, 1, 300, 260, 300, 200), "level 1 over HTTP")
    finally:
        proc.terminate()
        proc.wait()


def test_tile_with_a_missing_channel_is_transparent(sakura, tmp_path, read_region,
                                                    assert_same_pixels):
    """Tile (1, 0) of level 0 without its green JPEG, and a hash row of another: OpenSlide shows
    the tile transparent and the rest as before; so does slidepipe."""
    path = _edit(sakura, tmp_path / "no-green.svslide", f'DELETE FROM "{T}" WHERE id = ?',
                 ("T;256|0;1;1;0",))
    with openslide.OpenSlide(str(path)) as slide:
        want = np.asarray(slide.read_region((200, 0), 0, (400, 300)), dtype=np.uint8)
    got = read_region(path, 0, 200, 0, 400, 300)
    assert_same_pixels(got, want, "level 0 around the tile without green")
    assert not got[:256, 56:312].any() and got[:256, :56, 3].all()


def test_missing_table_fails_cleanly(sakura, tmp_path, run):
    """Without the table that names the blob table, the database is no SVSlide (OpenSlide does not
    open it either)."""
    path = _edit(sakura, tmp_path / "no-config.svslide", "DROP TABLE DataManagerSQLiteConfigXPO")
    with pytest.raises(openslide.OpenSlideError):
        openslide.OpenSlide(str(path))
    vendor_checks.assert_one_line_error(run(["info", path]), path,
                                        "DataManagerSQLiteConfigXPO")


def test_without_the_scan_table_reads_as_openslide(sakura, oracle, tmp_path, info):
    """Without SVHRScanDataXPO the metadata queries fail: OpenSlide opens the slide with no
    sakura.* properties but the version, no MPP, objective or thumbnail; so does slidepipe."""
    path = _edit(sakura, tmp_path / "no-scan.svslide", "DROP TABLE SVHRScanDataXPO")
    with openslide.OpenSlide(str(path)) as slide:
        want = {k: v for k, v in slide.properties.items() if not k.startswith("openslide.")}
        want_assoc = sorted(slide.associated_images)
        want_dims = list(slide.level_dimensions)
    got = info(path)
    assert want == {k: v for k, v in got["properties"].items() if not k.startswith("slidepipe.")}
    assert want == {"sakura.VersionBytes": "1.0.0"}
    assert sorted(got["associated"]) == want_assoc == ["label", "macro"]
    assert got["mpp_x"] is None and got["objective_power"] is None
    assert [(lv["width"], lv["height"]) for lv in got["levels"]] == want_dims


def test_tile_that_is_not_jpeg_fails_cleanly(sakura, tmp_path, run):
    """Level 0's first tile's green channel replaced by bytes that are no JPEG: the file opens, and
    reading the tile is an error naming the file and the tile (OpenSlide's read fails too)."""
    path = _edit(sakura, tmp_path / "spoiled.svslide", f'UPDATE "{T}" SET data = ? WHERE id = ?',
                 (b"\x00not a JPEG stream" * 8, "T;0|0;1;1;0"))
    with openslide.OpenSlide(str(path)) as slide, pytest.raises(openslide.OpenSlideError):
        slide.read_region((0, 0), 0, (64, 64))
    proc = run(["region", path, "--level", "0", "--x", "0", "--y", "0", "--width", "64",
                "--height", "64", "-o", tmp_path / "r.rgba"])
    vendor_checks.assert_one_line_error(proc, path, "T;0|0;1;1;0")


@pytest.mark.parametrize("tile_id, words", [
    ("T;0|0;3;0;0", "invalid downsample 3"),
    ("T;0|0;1;3;0", "bad field value"),
    ("T;0|0;1;0", "bad field count"),
])
def test_bad_tile_id_fails_cleanly(sakura, tmp_path, run, tile_id, words):
    """A tile id OpenSlide refuses (a downsample that is no power of two, channel 3, four fields):
    slidepipe refuses the file too, naming it and the id."""
    path = _edit(sakura, tmp_path / "bad-id.svslide", f'INSERT INTO "{T}" VALUES (?, 1, ?)',
                 (tile_id, b"\xff\xd8"))
    with pytest.raises(openslide.OpenSlideError):
        openslide.OpenSlide(str(path))
    vendor_checks.assert_one_line_error(run(["info", path]), path, words)


def test_huge_declared_size_fails_cleanly(sakura, tmp_path, run):
    """A Header declaring tiles of 2^31 pixels a side: refused before anything is allocated."""
    header = sakura_writer.header_blob(1 << 31, 1003, 761)
    path = _edit(sakura, tmp_path / "huge.svslide", f'UPDATE "{T}" SET data = ? WHERE id = ?',
                 (header, "Header"))
    vendor_checks.assert_one_line_error(run(["info", path]), path, "tiles of 2147483648")


def test_huge_image_reads_as_missing_tiles(sakura, tmp_path, run, info):
    """A Header declaring a 4-gigapixel-a-side image over the same tiles: the levels are that
    large (as in OpenSlide), the tiles beyond the stored ones are transparent, and reading one
    far away allocates only that region."""
    header = sakura_writer.header_blob(256, 0xFFFFFFFF, 0xFFFFFFFF)
    path = _edit(sakura, tmp_path / "huge-image.svslide", f'UPDATE "{T}" SET data = ? WHERE id = ?',
                 (header, "Header"))
    with openslide.OpenSlide(str(path)) as slide:
        want = slide.level_dimensions
    got = info(path)
    assert [(lv["width"], lv["height"]) for lv in got["levels"]] == list(want)
    out = tmp_path / "far.rgba"
    proc = run(["region", path, "--level", "0", "--x", "4000000000", "--y", "4000000000",
                "--width", "32", "--height", "32", "-o", out])
    assert proc.returncode == 0, proc.stderr
    assert not any(out.read_bytes())


def test_not_a_sakura_database_is_not_a_slide(tmp_path, run):
    """Any other SQLite database: one line naming the file."""
    path = tmp_path / "other.svslide"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    vendor_checks.assert_one_line_error(run(["info", path]), path, "not a Sakura SVSlide")
