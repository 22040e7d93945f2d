"""The encoder's forward pass in plain numpy: the reference the ONNX graph is checked against.

The same arithmetic as Hugging Face's BertModel (embeddings, six layers of
self-attention and GELU feed-forward, post-layer norms), written out for one
sentence so that a wrong step in ``bot.nlu.encoder_graph`` shows up as a
difference in ``tests/test_sentence_encoder.py``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

import numpy as np
from scipy.special import erf


def load_weights(directory: Path) -> Dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return {k: v.astype(np.float32) for k, v in load_file(str(directory / "model.safetensors")).items() if v.dtype != np.int64}


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def hidden_states(directory: Path, weights: Dict[str, np.ndarray], ids: List[int]) -> np.ndarray:
    """The last layer's output for one sentence's token ids (tokens, 384)."""
    config = json.loads((directory / "config.json").read_text())
    heads, layers, eps = int(config["num_attention_heads"]), int(config["num_hidden_layers"]), float(config["layer_norm_eps"])
    w = weights
    n = len(ids)
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n] + w["embeddings.token_type_embeddings.weight"][0]
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    size = x.shape[1] // heads

    def linear(t: np.ndarray, key: str) -> np.ndarray:
        return t @ w[key + ".weight"].T + w[key + ".bias"]

    for i in range(layers):
        p = f"encoder.layer.{i}."
        q = linear(x, p + "attention.self.query").reshape(n, heads, size)
        k = linear(x, p + "attention.self.key").reshape(n, heads, size)
        v = linear(x, p + "attention.self.value").reshape(n, heads, size)
        scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(size)
        scores -= scores.max(-1, keepdims=True)
        attn = np.exp(scores)
        attn /= attn.sum(-1, keepdims=True)
        context = np.einsum("hqk,khd->qhd", attn, v).reshape(n, -1)
        x = _layer_norm(x + linear(context, p + "attention.output.dense"), w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], eps)
        hidden = linear(x, p + "intermediate.dense")
        hidden = 0.5 * hidden * (1.0 + erf(hidden / np.sqrt(2.0)))
        x = _layer_norm(x + linear(hidden, p + "output.dense"), w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
    return x


def sentence_vector(directory: Path, weights: Dict[str, np.ndarray], ids: List[int]) -> np.ndarray:
    pooled = hidden_states(directory, weights, ids).mean(0)
    return (pooled / max(np.linalg.norm(pooled), 1e-12)).astype(np.float32)
