"""`slidepipe convert SLIDE... | --list FILE --out-dir DIR` and `slidepipe-mpi convert`: a cohort
converted to one OME-Zarr store per slide.

Each store must be what the one-slide form writes (the same dataset hash), a slide that fails
must be reported and leave the others converted (exit 3), and the MPI runner must print the same
document as the single process, whichever rank converted which slide.
"""

from __future__ import annotations

import json

import pytest

SLIDES = ["aperio/CMU-1-Small-Region.svs", "robustness/broken.svs", "generic-tiff/boxes.tiff",
          "generic-tiff/tiff_tiled_ycbcr_jpeg_2x2_sampling.tif"]
GOOD = [0, 2, 3]


@pytest.fixture(scope="module")
def single_hashes(run, testdata, tmp_path_factory):
    """Each good slide's dataset hash from the one-slide form."""
    out = tmp_path_factory.mktemp("single")
    hashes = {}
    for i in GOOD:
        proc = run(["convert", testdata / SLIDES[i], out / f"{i}.zarr", "--json"])
        assert proc.returncode == 0, proc.stderr
        hashes[i] = json.loads(proc.stdout)["dataset_hash"]
    return hashes


def store_of(rel: str) -> str:
    name = rel.rsplit("/", 1)[-1]
    return name[: name.rindex(".")] + ".zarr"


def without_timings(doc: dict) -> dict:
    for s in doc["slides"]:
        s.pop("seconds")
    return doc


def test_cohort_converts_every_readable_slide(run, testdata, single_hashes, tmp_path):
    out = tmp_path / "cohort"
    proc = run(["convert", *(testdata / s for s in SLIDES), "--out-dir", out, "--threads", "2"])
    assert proc.returncode == 3, proc.stderr
    assert f"slidepipe: {testdata / SLIDES[1]}" in proc.stderr
    assert "slidepipe: 1 of 4 slides failed" in proc.stderr
    lines = proc.stdout.splitlines()
    assert lines == [f"{single_hashes[i]}  {out}/{store_of(SLIDES[i])}" for i in GOOD]
    assert sorted(p.name for p in out.iterdir()) == sorted(store_of(SLIDES[i]) for i in GOOD)
    for i in GOOD:
        info = json.loads(run(["info", out / store_of(SLIDES[i]), "--json"]).stdout)
        assert info["dataset_hash"] == single_hashes[i]


def test_cohort_json_from_a_list_and_resume(run, testdata, single_hashes, tmp_path):
    lst = tmp_path / "cohort.txt"
    lst.write_text("# the cohort\n\n" + "".join(f"{testdata / s}\n" for s in SLIDES))
    out = tmp_path / "cohort"
    proc = run(["convert", "--list", lst, "--out-dir", f"{out}/", "--json"])
    assert proc.returncode == 3, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["converted"], doc["failed"]) == (3, 1)
    assert [s["slide"] for s in doc["slides"]] == [str(testdata / s) for s in SLIDES]
    assert [s["out"] for s in doc["slides"]] == [f"{out}/{store_of(s)}" for s in SLIDES]
    assert [s.get("dataset_hash") for s in doc["slides"]] == [single_hashes.get(i) for i in range(4)]
    assert set(doc["slides"][1]) == {"slide", "out", "error", "seconds"}
    assert all(s["levels"] >= 1 for i, s in enumerate(doc["slides"]) if i in GOOD)
    # Without --resume the stores are not overwritten; with it they are completed identically.
    proc = run(["convert", "--list", lst, "--out-dir", out, "--json"])
    assert proc.returncode == 3 and json.loads(proc.stdout)["failed"] == 4
    assert "exists (use --resume" in proc.stderr
    proc = run(["convert", "--list", lst, "--out-dir", out, "--json", "--resume"])
    assert without_timings(json.loads(proc.stdout)) == without_timings(doc)


def test_cohort_usage_errors(run, testdata, tmp_path):
    a = testdata / SLIDES[0]
    for args, message in [
        (["--list", tmp_path / "l.txt"], "--list needs --out-dir"),
        ([a, a, "--out-dir", tmp_path], "would both be written to"),
        (["--out-dir", tmp_path], "no slides given"),
        ([a], "expected SLIDE and OUT.zarr, or slides and --out-dir"),
    ]:
        proc = run(["convert", *args])
        assert proc.returncode == 2, (args, proc.stderr)
        assert message in proc.stderr, (args, proc.stderr)
    (tmp_path / "empty.txt").write_text("# nothing\n")
    proc = run(["convert", "--list", tmp_path / "empty.txt", "--out-dir", tmp_path / "o"])
    assert proc.returncode == 2 and "names no slide" in proc.stderr
    proc = run(["convert", "--list", tmp_path / "missing.txt", "--out-dir", tmp_path / "o"])
    assert proc.returncode == 1 and "cannot read the list" in proc.stderr


@pytest.mark.parametrize("ranks", [3, 1])
def test_mpi_cohort_equals_single_process(ranks, run, mpi_run, testdata, tmp_path):
    """Three ranks (rank 0 hands out slides and converts too), and one rank alone."""
    lst = tmp_path / "cohort.txt"
    lst.write_text("".join(f"{testdata / s}\n" for s in SLIDES))
    opts = ["--threads", "1", "--json"]
    single = run(["convert", "--list", lst, "--out-dir", tmp_path / "single", *opts])
    proc = mpi_run(ranks, ["convert", "--list", lst, "--out-dir", tmp_path / "mpi", *opts])
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert f"slidepipe: {testdata / SLIDES[1]}" in proc.stderr
    mpi_doc, single_doc = json.loads(proc.stdout), json.loads(single.stdout)
    for doc in (mpi_doc, single_doc):
        for s in doc["slides"]:
            s["out"] = s["out"].rsplit("/", 1)[-1]
    assert without_timings(mpi_doc) == without_timings(single_doc)


def test_mpi_convert_wants_a_cohort(mpi_run, testdata, tmp_path):
    proc = mpi_run(1, ["convert", testdata / SLIDES[0], tmp_path / "one.zarr"])
    assert proc.returncode == 2 and "--out-dir" in proc.stderr, proc.stderr
