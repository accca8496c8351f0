"""examples/train_cnn.py, the training script docs/train.md walks through, run for a few steps:
straight through, stopped and resumed, and repeated from its manifest, it must reach the same
loss at the same step (the batches, the augmentation and the model are all seeded)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="PyTorch is pinned in tests/requirements.txt")

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "train_cnn.py"


def run(*args):
    import slidepipe
    env = dict(os.environ, PYTHONPATH=str(Path(slidepipe.__file__).parents[1]))
    proc = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def last_loss(out):
    return re.findall(r"epoch (\d+) step (\d+) loss ([0-9.]+)", out)[-1]


def test_the_training_script_resumes_and_repeats_exactly(testdata, tmp_path):
    slides = [testdata / "aperio/CMU-1-Small-Region.svs",
              testdata / "aperio/tcga-cr-7395-01a-01-ts1.svs", "--slide-mpp", "0.5"]
    common = ["--steps", 5, "--batch", 8, "--threads", 2]
    straight = run(*slides, *common, "--out", tmp_path / "a")
    assert "2 slides" in straight and (tmp_path / "a" / "manifest.json").is_file()
    epoch, step, loss = last_loss(straight)
    assert (epoch, step) == ("0", "5") and 0 < float(loss) < 10
    run(*slides, "--steps", 2, "--batch", 8, "--out", tmp_path / "b")
    resumed = run(*slides, *common, "--out", tmp_path / "b", "--resume")
    assert "resuming at epoch 0, step 2" in resumed
    assert last_loss(resumed) == (epoch, step, loss)
    repeated = run("--repeat", tmp_path / "a" / "manifest.json", *common, "--out", tmp_path / "c")
    assert last_loss(repeated) == (epoch, step, loss)
