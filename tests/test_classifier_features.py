"""The classifier's one-message fast path computes what scikit-learn's batch code computes."""
from __future__ import annotations

from typing import List

import numpy as np
import pytest
import yaml

from rasa.nlu.tokenizers.tokenizer import Token
from rasa.shared.nlu.training_data.message import Message

from bot.nlu.classifier import Features, _Linear
from tests.conftest import DATA, PROJECT


def _messages(texts: List[str]) -> List[Message]:
    import spacy

    from bot.language import ensure_english_pipeline

    nlp = spacy.load(ensure_english_pipeline())
    messages = []
    for text in texts:
        message = Message({"text": text})
        message.set("text_tokens", [Token(t.text, t.idx, lemma=t.lemma_) for t in nlp(text)])
        messages.append(message)
    return messages


@pytest.fixture(scope="module")
def fitted():
    phrases = []
    for path in sorted((PROJECT / "data" / "nlu").glob("*.yml")):
        for block in yaml.safe_load(path.read_text(encoding="utf-8"))["nlu"]:
            phrases += [line[2:].strip() for line in block["examples"].splitlines() if line.startswith("- ")]
    cases = [c["text"] for c in yaml.safe_load((DATA / "dev_cases.yml").read_text(encoding="utf-8"))["cases"]]
    odd = ["", "   ", "zxqv blorp", "¿por qué lo extraño?", "😢😢", "HE HAS A GUN!!!", "a" * 3000, "why why why why"]
    features = Features()
    matrix = features.fit(_messages(phrases))
    return features, matrix, _messages(cases + odd)


def test_rows_match_the_batch_features(fitted) -> None:
    features, _, messages = fitted
    batch = features.transform(messages)
    assert features.width() == batch.shape[1]
    for i, message in enumerate(messages):
        row = features.row(message)
        expected = batch[i]
        expected.sort_indices()
        assert row.indices.tolist() == expected.indices.tolist(), message.get("text")
        assert np.array_equal(row.counts, expected.data.astype(np.float64)), message.get("text")


def test_rows_match_after_loading_the_vocabularies(fitted) -> None:
    features, _, messages = fitted
    vocabularies = features.vocabularies()
    loaded = Features(vocabularies["words"], vocabularies["chars"])
    for message in messages[:50]:
        a, b = features.row(message), loaded.row(message)
        assert a.indices.tolist() == b.indices.tolist() and np.array_equal(a.counts, b.counts)


def test_probabilities_match_scikit_learn(fitted) -> None:
    from sklearn.linear_model import LogisticRegression

    features, matrix, messages = fitted
    rng = np.random.default_rng(0)
    coef = rng.normal(size=(5, matrix.shape[1]))
    model = LogisticRegression(solver="liblinear", multi_class="ovr")
    model.coef_, model.intercept_, model.classes_ = coef, rng.normal(size=5), np.array(list("abcde"), dtype=object)
    linear = _Linear.of(model)
    batch = features.transform(messages)
    expected = model.predict_proba(batch)
    for i, message in enumerate(messages):
        got = linear.proba(features.row(message), features.width())
        assert np.allclose(got, expected[i], rtol=1e-9, atol=1e-12), message.get("text")
