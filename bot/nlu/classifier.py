"""The intent classifier: Rasa's logistic regression, safe with messages that have no words.

Rasa 3.6's ``LogisticRegressionClassifier`` raises on a message without
features (an empty or whitespace-only text), which turns into a 500. Such a
message now gets no intent with zero confidence, so the FallbackClassifier
answers it calmly with the closest topics.
"""
from __future__ import annotations

from typing import List

from rasa.engine.recipes.default_recipe import DefaultV1Recipe
from rasa.nlu.classifiers.logistic_regression_classifier import LogisticRegressionClassifier
from rasa.shared.nlu.constants import TEXT
from rasa.shared.nlu.training_data.message import Message


@DefaultV1Recipe.register(
    DefaultV1Recipe.ComponentType.INTENT_CLASSIFIER, is_trainable=True
)
class TopicClassifier(LogisticRegressionClassifier):
    """Logistic regression over the sparse features; no crash on empty messages."""

    def process(self, messages: List[Message]) -> List[Message]:
        with_features = [m for m in messages if _has_features(m)]
        if with_features:
            super().process(with_features)
        for message in messages:
            if not _has_features(message):
                message.set("intent", {"name": None, "confidence": 0.0}, add_to_output=True)
                message.set("intent_ranking", [], add_to_output=True)
        return messages


def _has_features(message: Message) -> bool:
    if not (message.get(TEXT) or "").strip():
        return False
    sparse = message.get_sparse_features(attribute=TEXT)[1]
    return sparse is not None and sparse.features.nnz > 0
