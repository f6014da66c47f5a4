"""The examples run end to end (shortened), so API changes cannot silently break them."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_example(name, *args):
    result = subprocess.run([sys.executable, os.path.join(ROOT, "examples", name), *args],
                            capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_digits_demo_trains_saves_and_reloads(tmp_path):
    out = run_example("digits_demo.py", "--epochs", "2", "--out", str(tmp_path))
    assert "CNN test accuracy" in out and "reloaded from checkpoint" in out
    mlp = float(out.split("MLP test accuracy: ")[1].split("%")[0])
    assert mlp > 90.0
    assert (tmp_path / "digits_cnn.safetensors").exists()
    assert (tmp_path / "digits_cnn_loss.png").exists()


def test_char_transformer_loss_falls():
    out = run_example("char_transformer.py", "--steps", "60", "--batch", "8", "--context",
                      "32", "--sample-chars", "20")
    losses = [float(line.split("loss ")[1].split()[0]) for line in out.splitlines()
              if line.startswith("step")]
    assert len(losses) >= 2 and losses[-1] < losses[0] - 1.0
    assert "--- sample ---" in out


def test_lstm_example_beats_its_baseline():
    out = run_example("lstm_sequence.py", "--epochs", "10")
    final, naive = out.strip().splitlines()[-1].split("final test MSE ")[1].split(" vs naive ")
    assert float(final) < float(naive)
