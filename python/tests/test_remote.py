"""Remote slides from Python, as a data loader reads them: batches through a server that answers
after a round trip (the regions' tiles are then fetched together, and must come out as the local
file's pixels), and workers forked (PyTorch's default on Linux) from a process that has read a
remote slide already: each worker must get its own connections. The parent's kept connections
are its own; a child that used them too would read answers meant for another process.
"""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

import slidepipe

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from loopback import LatencyProxy, start_nginx  # noqa: E402

SLIDE = "aperio/tcga-cr-7395-01a-01-ts1.svs"  # 3.9 MB: more than the source's block cache
SIZE = 256


def random_regions(local, count, seed):
    width, height = local.levels[0].width, local.levels[0].height
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(0, width - SIZE)), int(rng.integers(0, height - SIZE)))
            for _ in range(count)]


@pytest.mark.parametrize("threads", [1, 3])
def test_batches_through_a_round_trip_equal_local(testdata, tmp_path, threads):
    proc, port = start_nginx(str(testdata), str(tmp_path))
    proxy = LatencyProxy(port, 0.020)
    try:
        with slidepipe.open(testdata / SLIDE) as local:
            where = random_regions(local, 24, 7)
            expected = local.read_regions(where, 0, (SIZE, SIZE))
        slidepipe.set_cache_capacity(0)
        slidepipe.set_cache_capacity(256 << 20)
        with slidepipe.open(f"http://127.0.0.1:{proxy.port}/{SLIDE}") as s:
            got = s.read_regions(where, 0, (SIZE, SIZE), threads=threads)
        assert np.array_equal(got, expected)
        assert proxy.most_at_once >= 2  # the batch's tiles were fetched together
    finally:
        proxy.close()
        proc.terminate()
        proc.wait(timeout=10)


def forked_read(s, where, expected):
    """In a child: read `where` on two threads; exit 0 when the pixels are the expected ones."""
    code = 3
    try:
        got = s.read_regions(where, 0, (SIZE, SIZE), threads=2)
        code = 0 if np.array_equal(got, expected) else 2
    except Exception as e:  # noqa: BLE001 - reported through the exit status
        print(f"child {os.getpid()}: {e}", file=sys.stderr)
        code = 1
    finally:
        os._exit(code)


def test_forked_workers_read_a_remote_slide(testdata, tmp_path):
    proc, port = start_nginx(str(testdata), str(tmp_path))
    try:
        with slidepipe.open(testdata / SLIDE) as local:
            where = random_regions(local, 60, 3)
            expected = local.read_regions(where, 0, (SIZE, SIZE))
        slidepipe.set_cache_capacity(0)  # every child read goes to the server
        with slidepipe.open(f"http://127.0.0.1:{port}/{SLIDE}") as s:
            assert np.array_equal(s.read_regions(where[:4], 0, (SIZE, SIZE)), expected[:4])
            children = []
            for _ in range(4):
                pid = os.fork()
                if pid == 0:
                    forked_read(s, where, expected)
                children.append(pid)
            statuses = [os.waitpid(pid, 0)[1] for pid in children]
            assert np.array_equal(s.read_regions(where, 0, (SIZE, SIZE)), expected)
    finally:
        slidepipe.set_cache_capacity(256 << 20)
        proc.terminate()
        proc.wait(timeout=10)
    codes = [os.waitstatus_to_exitcode(st) for st in statuses]
    assert codes == [0] * len(children), f"children's exit codes {codes} (1: read error, 2: wrong pixels)"
