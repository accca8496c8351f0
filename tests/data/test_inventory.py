"""Every file in the shared test data, with slidepipe's verdict on it: it opens (and which test
module checks its facts and pixels against which oracle), or it fails with exit code 1 and a
clear one-line message (the message is checked). A file added to the shared data without a
verdict here fails test_every_file_has_a_verdict, so no file goes unaccounted for."""
import pytest

OPENS = {
    # file: where its facts and pixels are checked
    "aperio/CMU-1-Small-Region.svs": "test_openslide_oracle, test_vips_oracle (exact)",
    "aperio/tcga-cr-7395-01a-01-ts1.svs": "test_openslide_oracle (JPEG 2000: within 1, see docs/testing.md)",
    "generic-tiff/boxes.tiff": "test_openslide_oracle, test_vips_oracle (exact)",
    "generic-tiff/test_orient1.tif": "test_openslide_oracle, test_vips_oracle (exact)",
    "generic-tiff/tiff_tiled_ycbcr_jpeg_2x2_sampling.tif": "test_openslide_oracle, test_vips_oracle (exact)",
    "generic-tiff/yb10kx5k.zstd.tiff": "test_openslide_oracle, test_vips_oracle (exact)",
    "ome-tiff/multi-channel-z-series.ome.tif": "test_ome_tiff (tifffile, exact)",
    "qptiff/small_vectra.qptiff": "test_tifffile_oracle (exact; first channel page as grey)",
    "strip-tiff/kidney-48-5.tif": "test_tifffile_oracle (exact)",
    "robustness/grey10kx5k.tif": "test_tifffile_oracle (exact)",
    "robustness/smalltif.tif": "test_tifffile_oracle (exact; 16-bit mapped)",
    "robustness/tiff_tiled_planar_16bit_RGBa.tiff": "test_tifffile_oracle (exact; 16-bit, associated alpha)",
    "robustness/sparse.tiff": "test_tifffile_oracle (every tile missing: transparent)",
    "ndpi/test3-DAPI-2-387.ndpi": "test_openslide_oracle (exact: facts, every level, macro)",
    "dicom/multi_frame_jpeg_camelyon_challenge_image.dcm": "test_dicom (OpenSlide 4)",
    "dicom/boxes/boxes_0.dcm": "test_dicom (OpenSlide 4), as one file of the series",
    "dicom/boxes/boxes_1.dcm": "test_dicom, as one file of the series",
    **{
        f"dicom/cmu-1-small-region/level-{n}-frames-0-{f}.dcm": "test_dicom (OpenSlide 4, and the SVS it was made from)"
        for n, f in [(0, 30), (1, 9), (2, 4)] + [(k, 1) for k in range(3, 12)]
    },
}

FAILS = {
    # file: a fragment of the one-line message
    "robustness/broken.svs": "not a recognised slide format",
    "robustness/unopenable.tiff": "unsupported TIFF compression 52479",
    "robustness/zero_gi.tif": "the first TIFF image is empty",
}

NOT_SLIDES = {"README.md", "reference.json"}


def test_every_file_has_a_verdict(testdata):
    files = {p.relative_to(testdata).as_posix() for p in testdata.rglob("*") if p.is_file()}
    unaccounted = sorted(files - set(OPENS) - set(FAILS) - NOT_SLIDES)
    assert not unaccounted, f"shared test data files without a verdict here: {unaccounted}"
    missing = sorted((set(OPENS) | set(FAILS)) - files)
    assert not missing, f"files listed here but absent from the shared data: {missing}"


@pytest.mark.parametrize("rel", sorted(OPENS))
def test_opens(rel, testdata, info):
    facts = info(testdata / rel)
    assert facts["levels"], f"{rel} opened with no levels"


@pytest.mark.parametrize("rel", sorted(FAILS))
def test_fails_cleanly(rel, testdata, run):
    result = run(["info", str(testdata / rel)])
    assert result.returncode == 1, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("slidepipe: "), result.stderr
    assert FAILS[rel] in lines[0], lines[0]
