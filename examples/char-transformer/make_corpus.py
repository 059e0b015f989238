"""Writes corpus.txt, a text of about 240 kB that this script makes the same way every time,
and chars.npz, its windows of 64 characters as the transformer trains on them.

The text is sentences from a small grammar of subjects, verbs, objects and clauses (a few
hundred words), so that a character model has spelling, word order and punctuation to learn
and a held-out part that the training part predicts. `chars.npz` holds `x` (windows of 64
character codes) and `y` (the same windows one character on), as uint8; `alphabet` is the
characters, in code order (ASCII bytes). Run from this folder: `python make_corpus.py`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CONTEXT = 64
SIZE = 240_000  # characters

NOUNS = ("river", "city", "garden", "engine", "teacher", "merchant", "sailor", "window",
         "forest", "letter", "kingdom", "lantern", "machine", "painter", "village", "storm",
         "mountain", "student", "harbor", "library", "farmer", "bridge", "clock", "winter")
ADJECTIVES = ("old", "quiet", "bright", "small", "distant", "golden", "broken", "patient",
              "northern", "careful", "hidden", "early", "heavy", "silver", "gentle", "strange")
VERBS = ("watched", "crossed", "remembered", "opened", "followed", "built", "carried",
         "found", "painted", "answered", "waited for", "described", "repaired", "visited",
         "forgot", "measured")
ADVERBS = ("slowly", "again", "at dawn", "in silence", "before noon", "with care",
           "every morning", "without a word", "for a long time", "once more")
LINKS = ("and", "but", "while", "because", "so", "although", "until", "when")


def phrase(rng: np.random.Generator) -> str:
    words = ["the"]
    if rng.random() < 0.6:
        words.append(str(rng.choice(ADJECTIVES)))
    words.append(str(rng.choice(NOUNS)))
    return " ".join(words)


def clause(rng: np.random.Generator) -> str:
    parts = [phrase(rng), str(rng.choice(VERBS)), phrase(rng)]
    if rng.random() < 0.4:
        parts.append(str(rng.choice(ADVERBS)))
    return " ".join(parts)


def sentence(rng: np.random.Generator) -> str:
    text = clause(rng)
    while rng.random() < 0.45:
        text += f"{',' if rng.random() < 0.5 else ''} {rng.choice(LINKS)} {clause(rng)}"
    end = "." if rng.random() < 0.85 else ("?" if rng.random() < 0.5 else "!")
    return text[0].upper() + text[1:] + end


def corpus(size: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    lines, total = [], 0
    while total < size:
        paragraph = " ".join(sentence(rng) for _ in range(int(rng.integers(2, 6))))
        lines.append(paragraph)
        total += len(paragraph) + 1
    return "\n".join(lines)[:size]


def windows(text: str, alphabet: str) -> tuple[np.ndarray, np.ndarray]:
    codes = np.array([alphabet.index(c) for c in text], np.uint8)
    n = (len(codes) - 1) // CONTEXT
    x = codes[: n * CONTEXT].reshape(n, CONTEXT)
    y = codes[1: n * CONTEXT + 1].reshape(n, CONTEXT)
    return x, y


def main() -> None:
    text = corpus(SIZE)
    alphabet = "".join(sorted(set(text)))
    (HERE / "corpus.txt").write_text(text, encoding="utf-8")
    x, y = windows(text, alphabet)
    np.savez_compressed(HERE / "chars.npz", x=x, y=y,
                        alphabet=np.frombuffer(alphabet.encode("ascii"), np.uint8))
    print(f"corpus.txt: {len(text)} characters, {len(alphabet)} distinct; chars.npz: "
          f"{len(x)} windows of {CONTEXT}")


if __name__ == "__main__":
    main()
