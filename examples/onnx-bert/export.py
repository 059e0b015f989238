"""Writes bert.onnx and tokens.npz, what this example fine-tunes: a small BERT classifier from
Hugging Face `transformers`, exported by PyTorch (`pip install torch==2.13.0 "transformers<5"`,
then `python export.py`; seeded, so the files are the same each time).

The model is `BertForSequenceClassification` (vocabulary 64, hidden 32, 2 layers, 2 heads,
intermediate 64, 2 labels) with PyTorch's random initial weights, behind a wrapper that takes
the token ids alone and makes BERT's attention mask from them (token 0 is padding): the
exported graph computes the mask, and the classifier has one input, "ids" [batch x 16] int64
(a dynamic batch, sequences padded to 16), and one output, "logits" [batch x 2].

The task, made up so that it needs attention: a sequence of 6 to 16 tokens drawn from 1…63,
padded with 0; its label is 1 when token 7 occurs in it (half of them) and 0 otherwise.
tokens.npz holds 2,000 sequences ("ids") and their labels ("labels").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn
from transformers import BertConfig, BertForSequenceClassification

HERE = Path(__file__).resolve().parent
LENGTH, VOCAB, MARK, COUNT = 16, 64, 7, 2000


class BertIds(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=64,
                            max_position_embeddings=LENGTH, num_labels=2,
                            attn_implementation="eager")
        self.bert = BertForSequenceClassification(config)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.bert(input_ids=ids, attention_mask=(ids != 0).long()).logits


def dataset(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    ids = np.zeros((COUNT, LENGTH), np.int64)
    labels = np.arange(COUNT) % 2
    rng.shuffle(labels)
    for row, label in zip(ids, labels, strict=True):
        n = int(rng.integers(6, LENGTH + 1))
        tokens = rng.integers(1, VOCAB - 1, n)
        tokens[tokens >= MARK] += 1  # never the mark …
        if label:
            tokens[rng.integers(0, n)] = MARK  # … unless the label says so
        row[:n] = tokens
    return ids, labels.astype(np.int64)


def main() -> None:
    torch.manual_seed(0)
    model = BertIds().eval()
    torch.onnx.export(model, (torch.ones(2, LENGTH, dtype=torch.int64),), HERE / "bert.onnx",
                      dynamo=False, opset_version=17, input_names=["ids"],
                      output_names=["logits"], dynamic_axes={"ids": {0: "batch"}})
    ids, labels = dataset(np.random.default_rng(0))
    np.savez_compressed(HERE / "tokens.npz", ids=ids, labels=labels)


if __name__ == "__main__":
    main()
