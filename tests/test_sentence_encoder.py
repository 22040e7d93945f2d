"""The ONNX encoder computes what the model computes (checked against a numpy reference)."""
from __future__ import annotations

import numpy as np
import pytest

from bot.nlu import encoder_graph
from bot.nlu.sentence_encoder import SentenceEncoder
from tests import encoder_reference

TEXTS = [
    "why do i miss someone who hurt me",
    "my brain says no, my body says go to him",
    "hi",
    "¿por qué lo extraño si me hizo daño?",
    "i know it was abuse but i still feel the pull, every single night, and i don't understand why " * 3,
]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> SentenceEncoder:
    graph = encoder_graph.ensure_graph(tmp_path_factory.mktemp("encoder"))
    return SentenceEncoder(graph=graph, threads=1)


@pytest.fixture(scope="module")
def reference():
    directory = encoder_graph.source_dir()
    return directory, encoder_reference.load_weights(directory)


def test_one_sentence_matches_the_numpy_reference(encoder: SentenceEncoder, reference) -> None:
    directory, weights = reference
    for text in TEXTS:
        expected = encoder_reference.sentence_vector(directory, weights, encoder.token_ids(text))
        got = encoder.encode([text])[0]
        assert np.abs(got - expected).max() < 1e-5, text
        assert abs(float(np.linalg.norm(got)) - 1.0) < 1e-5


def test_a_padded_batch_gives_each_sentence_its_own_vector(encoder: SentenceEncoder) -> None:
    batch = encoder.encode(TEXTS)
    for text, row in zip(TEXTS, batch):
        alone = encoder.encode([text])[0]
        assert np.abs(row - alone).max() < 1e-5, text


def test_empty_texts_get_zero_vectors(encoder: SentenceEncoder) -> None:
    vectors = encoder.encode(["", "   ", "hello"])
    assert not vectors[0].any() and not vectors[1].any()
    assert vectors[2].any()
    assert encoder.encode([]).shape == (0, 384)


def test_paraphrases_are_closer_than_unrelated_texts(encoder: SentenceEncoder) -> None:
    a, b, c = encoder.encode(["why do i miss my abusive ex", "why do i still long for the person who hurt me", "what time does the shop open"])
    assert float(a @ b) > float(a @ c) + 0.2


def test_the_graph_is_rebuilt_when_it_is_stale(tmp_path) -> None:
    path = encoder_graph.ensure_graph(tmp_path)
    assert encoder_graph.is_current(path)
    path.with_suffix(".json").write_text('{"graph_version": 0}')
    assert not encoder_graph.is_current(path)
    assert encoder_graph.ensure_graph(tmp_path) == path and encoder_graph.is_current(path)
