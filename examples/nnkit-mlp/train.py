"""Train the NNKit digits MLP from Python: `python examples/nnkit-mlp/train.py`.

The same data, split and schedule as `dlvm run examples/nnkit-mlp/pipeline.toml`, without
the pipeline file: staged functions applied to numpy arrays are compiled through DLVM on
first use.
"""

from __future__ import annotations

import runpy
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def main() -> None:
    program = runpy.run_path(str(HERE / "model.py"))["program"]
    with np.load(HERE.parent / "digits-mlp" / "digits.npz") as data:
        x = data["images"].astype(np.float32) / 16.0
        labels = data["labels"].astype(np.int64)
    y = np.eye(10, dtype=np.float32)[labels]
    rng = np.random.default_rng(0)
    order = rng.permutation(len(x))
    test = order[: len(x) // 5]
    train = order[len(x) // 5:]
    values = program.init(np.random.default_rng(0))
    start = time.perf_counter()
    for epoch in range(1, 31):
        shuffle = np.random.default_rng(epoch).permutation(train)
        losses = [program.train_step(values, x[b], y[b], 0.01 / (1 + 0.02 * epoch))
                  for b in np.array_split(shuffle, max(1, len(shuffle) // 32))]
        if epoch % 10 == 0:
            print(f"epoch {epoch}: loss {np.mean(losses):.4f}")
    names = program.parameter_names
    logits = program.predict(*(values[n] for n in names), x[test])
    accuracy = float((logits.argmax(1) == labels[test]).mean())
    print(f"test accuracy: {accuracy:.2%} ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
