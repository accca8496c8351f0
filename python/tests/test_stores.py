"""convert, process and verify through the binding: each store must be the one the command line of
the same build writes with the same options (the same dataset hash), progress must be reported,
bad options must be refused before anything is written, and verify must report what
`slidepipe verify` reports.
"""

import json
import threading

import pytest

import slidepipe

SMALL = "aperio/CMU-1-Small-Region.svs"


def cli_hash(cli, *args):
    return json.loads(cli(*args, "--json").stdout)["dataset_hash"]


@pytest.mark.parametrize("kwargs, flags", [
    ({}, []),
    ({"format": "ome-zarr-0.5", "chunk": 256, "shard": 2, "codec": "blosc-lz4", "codec_level": 3},
     ["--format", "ome-zarr-0.5", "--chunk", "256", "--shard", "2", "--codec", "blosc-lz4",
      "--level", "3"]),
    ({"layout": "yxc", "levels": 2, "threads": 1}, ["--layout", "yxc", "--levels", "2",
                                                     "--threads", "1"]),
])
def test_convert_equals_the_command(cli, testdata, tmp_path, kwargs, flags):
    want = cli_hash(cli, "convert", testdata / SMALL, tmp_path / "cli.zarr", *flags)
    calls = []
    got = slidepipe.convert(testdata / SMALL, tmp_path / "py.zarr",
                            progress=lambda done, total: calls.append((done, total)), **kwargs)
    assert got == want
    assert calls and calls[-1][0] == calls[-1][1] > 0
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    with slidepipe.open(testdata / SMALL) as s:  # an open Slide works as the source too
        assert slidepipe.convert(s, tmp_path / "again.zarr", **kwargs) == want
        assert s.read_region((0, 0), 0, (8, 8)).shape == (8, 8, 4)  # and stays open


def test_process_equals_the_command(cli, testdata, tmp_path):
    want = cli_hash(cli, "process", testdata / SMALL, tmp_path / "cli.zarr", "--op", "sobel",
                    "--chunk", "512", "--mode", "global")
    got = slidepipe.process(testdata / SMALL, tmp_path / "py.zarr", "sobel", chunk=512,
                            mode="global")
    assert got == want
    want = cli_hash(cli, "process", testdata / SMALL, tmp_path / "cli8.zarr", "--op", "sobel",
                    "--dtype", "uint8")
    assert slidepipe.process(testdata / SMALL, tmp_path / "py8.zarr", "sobel", dtype="uint8") == want


def test_verify_reports_what_the_command_reports(cli, testdata, tmp_path):
    store = tmp_path / "s.zarr"
    h = slidepipe.convert(testdata / SMALL, store)
    assert slidepipe.verify(store) == (True, h, [])
    (store / "0" / "0" / "0" / "0").unlink()
    chunk = store / "1" / "0" / "0" / "0"
    chunk.write_bytes(chunk.read_bytes()[:-1] + b"\0")
    result = slidepipe.verify(store)
    assert not result.intact and result.dataset_hash == h
    # The pixels no longer give the recorded pixel hash (docs/pixel-hash.md): "unreadable" when
    # the truncated chunk no longer decodes, "changed" when it decodes to other pixels.
    pixels = [p for p in result.problems if p[0] == "pixel_hash"]
    assert len(pixels) == 1 and pixels[0][1] in ("changed", "unreadable")
    assert sorted(p for p in result.problems if p[0] != "pixel_hash") == [("0/0/0/0", "missing"),
                                                                          ("1/0/0/0", "changed")]
    doc = json.loads(cli("verify", store, "--json", check=False).stdout)
    assert sorted((p["path"], p["problem"]) for p in doc["problems"]) == sorted(result.problems)
    (store / "slidepipe-complete").unlink()
    with pytest.raises(slidepipe.SlidepipeError, match="incomplete conversion"):
        slidepipe.verify(store)


def test_bad_options_write_nothing(testdata, tmp_path):
    for kwargs, match in [({"codec": "lzma"}, "bad codec"), ({"format": "zarr"}, "bad format"),
                          ({"chunk": 100}, "out of range"), ({"layout": "xy"}, "bad layout")]:
        with pytest.raises(ValueError, match=match):
            slidepipe.convert(testdata / SMALL, tmp_path / "x.zarr", **kwargs)
    with pytest.raises(ValueError, match="bad mode"):
        slidepipe.process(testdata / SMALL, tmp_path / "x.zarr", "grey", mode="fast")
    with pytest.raises(ValueError, match="bad dtype"):
        slidepipe.process(testdata / SMALL, tmp_path / "x.zarr", "sobel", dtype="float16")
    with pytest.raises(slidepipe.SlidepipeError):
        slidepipe.process(testdata / SMALL, tmp_path / "x.zarr", "blur")
    assert not (tmp_path / "x.zarr").exists()
    slidepipe.convert(testdata / SMALL, tmp_path / "y.zarr")
    with pytest.raises(slidepipe.SlidepipeError, match="exists"):
        slidepipe.convert(testdata / SMALL, tmp_path / "y.zarr")


def test_progress_exception_is_raised_after_the_job(testdata, tmp_path):
    def fail(done, total):
        raise KeyError("stop")

    with pytest.raises(KeyError, match="stop"):
        slidepipe.convert(testdata / SMALL, tmp_path / "p.zarr", progress=fail)


def test_conversion_releases_the_gil(testdata, tmp_path):
    """Another Python thread runs while a conversion is under way."""
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(1)
            done.wait(0.001)

    t = threading.Thread(target=tick)
    t.start()
    try:
        slidepipe.convert(testdata / "aperio/tcga-cr-7395-01a-01-ts1.svs", tmp_path / "t.zarr",
                          threads=1)
    finally:
        done.set()
        t.join()
    assert len(ticks) > 5
