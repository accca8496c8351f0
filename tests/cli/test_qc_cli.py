"""`slidepipe synth --artifacts` and `slidepipe tiles --qc` from the command line (docs/qc.md):
the sidecar names the artefacts, the default synth file is unchanged by the new option's code
path, the text and JSON forms agree, output without --qc keeps its old form, and bad options are
refused. The scores themselves are checked in python/tests/test_tile_qc.py."""

import hashlib
import json
import subprocess

from conftest import slidepipe_path


def _run(*args):
    return subprocess.run([str(slidepipe_path()), *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_synth_artifacts_sidecar_and_default_unchanged(tmp_path):
    plain, art = tmp_path / "plain.tif", tmp_path / "art.tif"
    assert _run("synth", plain, "--size", 2048, "--seed", 4).returncode == 0
    assert not (tmp_path / "plain.tif.artifacts.json").exists()
    proc = _run("synth", art, "--size", 2048, "--seed", 4, "--artifacts")
    assert proc.returncode == 0, proc.stderr
    sidecar = tmp_path / "art.tif.artifacts.json"
    assert proc.stdout == f"artifacts: {sidecar}\n"
    doc = json.loads(sidecar.read_text())
    assert doc["size"] == 2048 and doc["seed"] == 4
    assert [a["kind"] for a in doc["artifacts"]] == ["pen_blue", "pen_green", "pen_black", "blur",
                                                    "fold"]
    for a in doc["artifacts"]:
        assert 0 <= a["x"] < a["x"] + a["width"] <= 2048 and 0 <= a["y"] < a["y"] + a["height"] <= 2048
    assert _digest(plain) != _digest(art)
    again = tmp_path / "again.tif"
    assert _run("synth", again, "--size", 2048, "--seed", 4).returncode == 0
    assert _digest(again) == _digest(plain)

    # tiles: the plain listing is a prefix of every --qc line, and JSON matches text
    bare = _run("tiles", art, "--size", 256).stdout.splitlines()
    qc_text = _run("tiles", art, "--size", 256, "--qc", "--threads", 1).stdout.splitlines()
    assert len(bare) == len(qc_text) > 0
    assert all(q.startswith(b + " blur=") for b, q in zip(bare, qc_text))
    doc = json.loads(_run("tiles", art, "--size", 256, "--qc", "--json").stdout)
    assert set(doc) == {"level", "size", "stride", "count", "tiles", "qc"}
    for line, q in zip(qc_text, doc["qc"]):
        fields = dict(f.split("=") for f in line.split()[3:])
        assert float(fields["blur"]) == round(q["blur"], 2)
        assert float(fields["pen"]) == round(q["pen"], 4)
    assert "qc" not in json.loads(_run("tiles", art, "--size", 256, "--json").stdout)


def test_refusals(tmp_path):
    small = _run("synth", tmp_path / "s.tif", "--size", 512, "--artifacts")
    assert small.returncode != 0 and "1024" in small.stderr
    assert not (tmp_path / "s.tif").exists()
    _run("synth", tmp_path / "t.tif", "--size", 1024)
    bad = _run("tiles", tmp_path / "t.tif", "--size", 256, "--qc", "--threads", "-1")
    assert bad.returncode != 0 and "--threads" in bad.stderr
