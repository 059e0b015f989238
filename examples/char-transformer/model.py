"""A decoder-only character transformer in NNKit: 2 pre-norm blocks, d_model 128, 4 heads,
context 64, trained with AdamW (warm-up, cosine decay) on next-character prediction.

`dlvm run examples/char-transformer/pipeline.toml` reads this file through the `nnkit`
front end: `train_step` trains, `init_params` makes the initial parameters and `loss` is the
mean cross-entropy; sample.py uses `program.predict` (the scores of the next character at
each position) to write text from a prompt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dlvm import nnkit as nn
from dlvm.nnkit import Tensor, f32, i64

VOCAB, CONTEXT, DIM, HEADS, LAYERS = 32, 64, 128, 4, 2
STEPS, WARMUP = 600, 30  # the cosine schedule reaches 0 at STEPS (batches of 32)


@dataclass(frozen=True)
class Positions:
    """a learned vector per position of the context, added to the token embeddings"""

    context: int
    dim: int
    name: str = "pos"

    def parameters(self) -> list[tuple[str, nn.TensorSpec]]:
        return [(f"{self.name}_table", nn.TensorSpec(f32, (self.context, self.dim)))]

    def init(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        table = 0.02 * rng.standard_normal((self.context, self.dim))
        return {f"{self.name}_table": table.astype(np.float32)}

    def __call__(self, params: Any, x: Any) -> Any:
        return x + params[f"{self.name}_table"]


model = nn.Sequential([
    nn.Embedding(VOCAB, DIM),
    Positions(CONTEXT, DIM),
    *[nn.TransformerBlock(DIM, HEADS, CONTEXT, 4 * DIM, name=f"block{k}")
      for k in range(LAYERS)],
    nn.LayerNorm(DIM, name="final_ln"),
    nn.Dense(DIM, VOCAB, name="head"),
])


def cross_entropy(scores: Any, targets: Any) -> Any:
    """mean over positions of −log softmax(scores)[target]"""
    hot = nn.equal(nn.pad_shape(targets, 2), np.arange(VOCAB, dtype=np.int64)).astype(f32)
    return -nn.mean(nn.sum(nn.log_softmax(scores, -1) * hot, 2))


program = nn.training(model, cross_entropy,
                      nn.AdamW(beta2=0.99, weight_decay=0.1, warmup=WARMUP, total=STEPS),
                      inputs=Tensor[i64, (None, CONTEXT)], targets=Tensor[i64, (None, CONTEXT)])
train_step = program.step
loss = program.loss
_initial = program.init(np.random.default_rng(0))
# the step's (parameters…, AdamW's state…) as constants: what `train.init_function` starts from
init_params = nn.lambda_(lambda: tuple(_initial[n] for n in (*program.parameter_names,
                                                             *program.state_names)), [],
                         name="init_params")
