"""The intent classifier: fast bag-of-words first, a sentence encoder only when unsure.

Two logistic regressions (liblinear, one-vs-rest) share the sparse word and
character n-gram features from the pipeline:

- the *fast* model uses only those features (about a millisecond);
- the *full* model adds a sentence embedding (``bot.nlu.sentence_encoder``),
  which understands paraphrases the words alone miss, at ~10 ms a message.

A message whose fast prediction is confident enough keeps it; the others are
embedded and classified by the full model. On the dev set this keeps most
messages on the fast path with the accuracy of the full model (see README).
Messages without any feature (empty, whitespace) get no intent and fall back
calmly instead of crashing, as Rasa's own classifier does.
"""
from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Text, Type

import numpy as np
from scipy.sparse import csr_matrix, hstack, vstack
from sklearn.linear_model import LogisticRegression

from rasa.engine.graph import ExecutionContext, GraphComponent
from rasa.engine.recipes.default_recipe import DefaultV1Recipe
from rasa.engine.storage.resource import Resource
from rasa.engine.storage.storage import ModelStorage
from rasa.nlu.classifiers.classifier import IntentClassifier
from rasa.nlu.featurizers.featurizer import Featurizer
from rasa.shared.nlu.constants import INTENT, TEXT
from rasa.shared.nlu.training_data.message import Message
from rasa.shared.nlu.training_data.training_data import TrainingData

from bot import paths

logger = logging.getLogger(__name__)

CRISIS_INTENT = "crisis"


@DefaultV1Recipe.register(
    DefaultV1Recipe.ComponentType.INTENT_CLASSIFIER, is_trainable=True
)
class TopicClassifier(GraphComponent, IntentClassifier):
    """Fast-then-full intent classifier (see the module docstring)."""

    @classmethod
    def required_components(cls) -> List[Type]:
        return [Featurizer]

    @staticmethod
    def get_default_config() -> Dict[Text, Any]:
        return {
            "C": 1.0,
            # Weight of the sentence embedding against the n-gram counts.
            "embedding_scale": 20.0,
            # Keep the fast prediction when its confidence is at least this.
            "fast_confidence": 0.95,
            "use_embeddings": True,
            "ranking_length": 10,
            "random_state": 42,
        }

    def __init__(
        self,
        config: Dict[Text, Any],
        model_storage: ModelStorage,
        resource: Resource,
        fast: Optional[LogisticRegression] = None,
        full: Optional[LogisticRegression] = None,
    ) -> None:
        self.config = {**self.get_default_config(), **config}
        self._model_storage = model_storage
        self._resource = resource
        self.fast = fast
        self.full = full

    @classmethod
    def create(
        cls,
        config: Dict[Text, Any],
        model_storage: ModelStorage,
        resource: Resource,
        execution_context: ExecutionContext,
    ) -> "TopicClassifier":
        return cls(config, model_storage, resource)

    def _new_model(self) -> LogisticRegression:
        return LogisticRegression(
            C=self.config["C"], solver="liblinear", max_iter=1000, random_state=self.config["random_state"]
        )

    # ------------------------------------------------------------------ training

    def train(self, training_data: TrainingData) -> Resource:
        examples = [e for e in training_data.intent_examples if e.get(INTENT) and e.get(TEXT)]
        if not examples:
            logger.warning("TopicClassifier: no intent examples to train on")
            return self._resource
        labels = [e.get(INTENT) for e in examples]
        sparse = vstack([_sparse_row(e) for e in examples]).tocsr()
        self.fast = self._new_model().fit(sparse, labels)
        if self.config["use_embeddings"]:
            embeddings = embed_training_examples([e.get(TEXT) for e in examples])
            self.full = self._new_model().fit(self._joint(sparse, embeddings), labels)
        self.persist()
        return self._resource

    def _joint(self, sparse: csr_matrix, embeddings: np.ndarray) -> csr_matrix:
        return hstack([sparse, csr_matrix(embeddings * self.config["embedding_scale"])]).tocsr()

    def persist(self) -> None:
        import skops.io as sio

        with self._model_storage.write_to(self._resource) as directory:
            sio.dump(self.fast, directory / "fast.skops")
            if self.full is not None:
                sio.dump(self.full, directory / "full.skops")

    @classmethod
    def load(
        cls,
        config: Dict[Text, Any],
        model_storage: ModelStorage,
        resource: Resource,
        execution_context: ExecutionContext,
        **kwargs: Any,
    ) -> "TopicClassifier":
        import skops.io as sio

        def read(path: Path) -> Optional[LogisticRegression]:
            if not path.exists():
                return None
            return sio.load(path, trusted=sio.get_untrusted_types(file=path))

        try:
            with model_storage.read_from(resource) as directory:
                return cls(config, model_storage, resource, read(directory / "fast.skops"), read(directory / "full.skops"))
        except ValueError:
            return cls(config, model_storage, resource)

    # ------------------------------------------------------------------ inference

    def process(self, messages: List[Message]) -> List[Message]:
        for message in messages:
            ranking = self.rank(message) if self.fast is not None else []
            intent = ranking[0] if ranking else {"name": None, "confidence": 0.0}
            message.set(INTENT, intent, add_to_output=True)
            message.set("intent_ranking", ranking[: self.config["ranking_length"]], add_to_output=True)
        return messages

    def rank(self, message: Message) -> List[Dict[str, Any]]:
        """Intents with confidences, best first (empty for a message without features)."""
        row = _sparse_row(message)
        if row.nnz == 0 or not (message.get(TEXT) or "").strip():
            return []
        probabilities = self.fast.predict_proba(row)[0]
        classes = self.fast.classes_
        unsure = probabilities.max() < self.config["fast_confidence"]
        crisis = classes[int(np.argmax(probabilities))] == CRISIS_INTENT
        if (unsure or crisis) and self.full is not None:  # a crisis guess deserves the better model
            embedding = embed_message(message.get(TEXT))
            probabilities = self.full.predict_proba(self._joint(row, embedding))[0]
            classes = self.full.classes_
        order = np.argsort(-probabilities)
        return [{"name": str(classes[i]), "confidence": float(probabilities[i])} for i in order]


def _sparse_row(message: Message) -> csr_matrix:
    features = message.get_sparse_features(attribute=TEXT)[1]
    if features is None:
        return csr_matrix((1, 0))
    return csr_matrix(features.features)


# ---------------------------------------------------------------------- embeddings


def _cache_path() -> Path:
    return paths.var_dir() / "cache" / "sentence-embeddings.npz"


def embed_training_examples(texts: List[str]) -> np.ndarray:
    """Embeddings of training examples, cached on disk so that retraining reuses them.

    (Visitors' messages are never cached: only training examples pass here.)
    """
    from bot.nlu.sentence_encoder import shared_encoder

    cached: Dict[str, np.ndarray] = {}
    if _cache_path().exists():
        with np.load(_cache_path()) as stored:
            cached = {k: stored[k] for k in stored.files}
    keys = [hashlib.sha1(t.encode("utf-8")).hexdigest() for t in texts]
    missing = sorted({k: t for k, t in zip(keys, texts) if k not in cached}.items())
    if missing:
        logger.info("TopicClassifier: embedding %d new training examples", len(missing))
        vectors = shared_encoder().encode([t for _, t in missing])
        cached.update({k: v for (k, _), v in zip(missing, vectors)})
        _cache_path().parent.mkdir(parents=True, exist_ok=True)
        np.savez(_cache_path(), **{k: cached[k] for k in set(keys) | set(cached)})
    return np.vstack([cached[k] for k in keys])


def embed_message(text: str) -> np.ndarray:
    from bot.nlu.sentence_encoder import shared_encoder

    return shared_encoder().encode([text])
