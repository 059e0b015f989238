"""After `dlvm run pipeline.toml`: the held-out loss of the trained transformer and text it
writes from a prompt. `python sample.py [--checkpoint PATH] [--prompt TEXT] [--length N]`.

The held-out windows are the ones `dlvm run` kept out (the pipeline's test_fraction and
split_seed, the same permutation). Text is written one character at a time: the prompt's
last 64 characters (padded in front with spaces) go through the model, the next
character is drawn from the softmax of its scores at temperature 0.8, and appended
(`predict`, the staged model, compiled on first use).
"""

from __future__ import annotations

import argparse
import runpy
import tomllib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default=str(HERE / "out" / "pipeline" / "latest" /
                                                     "params.npz"))
    parser.add_argument("--prompt", default="The old sailor")
    parser.add_argument("--length", type=int, default=200)
    args = parser.parse_args()
    module = runpy.run_path(str(HERE / "model.py"))
    program, context = module["program"], module["CONTEXT"]
    with np.load(args.checkpoint) as saved:
        params = [saved[n] for n in program.parameter_names]
    with np.load(HERE / "chars.npz") as data:
        x, y = data["x"].astype(np.int64), data["y"].astype(np.int64)
        alphabet = bytes(data["alphabet"]).decode("ascii")
    spec = tomllib.loads((HERE / "pipeline.toml").read_text(encoding="utf-8"))["data"]
    order = np.random.default_rng(spec["split_seed"]).permutation(len(x))
    test = order[:round(len(x) * spec["test_fraction"])]
    losses = [float(program.loss(*params, x[test[k:k + 64]], y[test[k:k + 64]])) *
              len(test[k:k + 64]) for k in range(0, len(test), 64)]
    print(f"held-out loss: {sum(losses) / len(test):.4f} nats per character "
          f"({len(test)} windows of {context})")
    rng = np.random.default_rng(0)
    text = args.prompt
    for _ in range(args.length):
        window = text[-context:].rjust(context)
        codes = np.array([[alphabet.index(c) if c in alphabet else alphabet.index(" ")
                           for c in window]], np.int64)
        scores = program.predict(*params, codes)[0, -1, :len(alphabet)].astype(np.float64)
        p = np.exp((scores - scores.max()) / 0.8)  # codes past the alphabet never occur
        text += alphabet[int(rng.choice(len(p), p=p / p.sum()))]
    print(text)


if __name__ == "__main__":
    main()
