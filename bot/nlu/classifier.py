"""The intent classifier: fast bag-of-words first, a sentence encoder only when unsure.

Features: counts of the message's lemma unigrams and bigrams (from the spaCy
tokens of the pipeline) and of character 2-4-grams (robust to typos), made
with scikit-learn in one batch. Two logistic regressions (liblinear,
one-vs-rest) use them:

- the *fast* model uses only those counts (well under a millisecond);
- the *full* model adds a sentence embedding (``bot.nlu.sentence_encoder``),
  which understands paraphrases the words alone miss, at ~10 ms a message.

A message that is word for word one of the example phrases of a single
intent (ignoring case, spaces and end punctuation) gets that intent with
full confidence: what maintainers taught is answered as taught, and needs
no encoder. A message whose fast prediction is confident enough keeps it; the others
(and every crisis guess the danger rules do not already hand off) are
embedded and classified by the full model. On
the dev set this keeps most messages on the fast path with the accuracy of
the full model (see README). Messages without any feature (empty,
whitespace) get no intent and fall back calmly instead of crashing, as
Rasa's own classifier does. Models and vocabularies are saved as plain
arrays and JSON: nothing is unpickled when a model loads.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Text, Type

import numpy as np
from scipy.sparse import csr_matrix, hstack
from scipy.special import expit
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression

from rasa.engine.graph import ExecutionContext, GraphComponent
from rasa.engine.recipes.default_recipe import DefaultV1Recipe
from rasa.engine.storage.resource import Resource
from rasa.engine.storage.storage import ModelStorage
from rasa.nlu.classifiers.classifier import IntentClassifier
from rasa.nlu.tokenizers.tokenizer import Tokenizer
from rasa.shared.nlu.constants import INTENT, TEXT, TEXT_TOKENS
from rasa.shared.nlu.training_data.message import Message
from rasa.shared.nlu.training_data.training_data import TrainingData

from bot import paths

logger = logging.getLogger(__name__)

CRISIS_INTENT = "crisis"
#: Confidence factor for a message without a single known word (makes it fall back).
UNKNOWN_WORDS_DISCOUNT = 0.3


def taught_key(text: str) -> str:
    """An example phrase or a message as the taught-phrase lookup compares them."""
    return " ".join((text or "").casefold().split()).strip(" .,!?")


def taught_phrases(examples: Iterable[Message]) -> Dict[str, str]:
    """Each example phrase of exactly one intent, with that intent (phrases of two intents are left out)."""
    seen: Dict[str, set] = {}
    for example in examples:
        key = taught_key(example.get(TEXT))
        if key:
            seen.setdefault(key, set()).add(example.get(INTENT))
    return {key: next(iter(intents)) for key, intents in seen.items() if len(intents) == 1}


def _lemma_ngrams(lemmas: List[str]) -> List[str]:
    """Lemma unigrams and bigrams ("miss", "miss him")."""
    return lemmas + [f"{a} {b}" for a, b in zip(lemmas, lemmas[1:])]


class Features:
    """The bag-of-words features: lemma n-grams and character n-grams, vectorised in batches."""

    def __init__(self, words: Optional[Dict[str, int]] = None, chars: Optional[Dict[str, int]] = None) -> None:
        self.words = CountVectorizer(analyzer=_lemma_ngrams, vocabulary=words, dtype=np.float32)
        self.chars = CountVectorizer(analyzer="char_wb", ngram_range=(2, 4), lowercase=True, vocabulary=chars, dtype=np.float32)
        self._analyzers: Optional[tuple] = None  # built on the first ``row``, after fitting

    @staticmethod
    def lemmas(message: Message) -> List[str]:
        tokens = message.get(TEXT_TOKENS) or []
        return [(getattr(t, "lemma", None) or t.text).lower() for t in tokens if (t.text or "").strip()]

    def fit(self, messages: List[Message]) -> csr_matrix:
        self._analyzers = None
        lemmas = [self.lemmas(m) for m in messages]
        texts = [(m.get(TEXT) or "").lower() for m in messages]
        return hstack([self.words.fit_transform(lemmas), self.chars.fit_transform(texts)]).tocsr()

    def transform(self, messages: List[Message]) -> csr_matrix:
        lemmas = [self.lemmas(m) for m in messages]
        texts = [(m.get(TEXT) or "").lower() for m in messages]
        return hstack([self.words.transform(lemmas), self.chars.transform(texts)]).tocsr()

    def row(self, message: Message) -> "SparseRow":
        """One message's features, as ``transform`` gives them, without building a sparse matrix.

        The same analyzers and vocabularies; only the bookkeeping of
        scikit-learn's batch code (a fifth of a millisecond per message) is left out.
        """
        words, chars = self.words, self.chars
        if self._analyzers is None:
            self._analyzers = (words.build_analyzer(), chars.build_analyzer(), _vocabulary(words), _vocabulary(chars))
        analyse_words, analyse_chars, word_ids, char_ids = self._analyzers
        counts: Dict[int, int] = {}
        for feature in analyse_words(self.lemmas(message)):
            index = word_ids.get(feature)
            if index is not None:
                counts[index] = counts.get(index, 0) + 1
        offset = len(word_ids)
        for feature in analyse_chars((message.get(TEXT) or "").lower()):
            index = char_ids.get(feature)
            if index is not None:
                counts[offset + index] = counts.get(offset + index, 0) + 1
        indices = np.array(sorted(counts), dtype=np.int64)
        return SparseRow(indices, np.array([counts[i] for i in indices.tolist()], dtype=np.float64))

    def knows_a_word(self, message: Message) -> bool:
        """True when at least one of the message's words was in the training phrases."""
        vocabulary = self.words.vocabulary_ if hasattr(self.words, "vocabulary_") else self.words.vocabulary
        return any(lemma in vocabulary for lemma in self.lemmas(message) if lemma.isalpha())

    def width(self) -> int:
        """How many count features there are (the embedding's columns come after them)."""
        return len(_vocabulary(self.words)) + len(_vocabulary(self.chars))

    def vocabularies(self) -> Dict[str, Dict[str, int]]:
        return {
            "words": {k: int(v) for k, v in self.words.vocabulary_.items()},
            "chars": {k: int(v) for k, v in self.chars.vocabulary_.items()},
        }


@DefaultV1Recipe.register(
    DefaultV1Recipe.ComponentType.INTENT_CLASSIFIER, is_trainable=True
)
class TopicClassifier(GraphComponent, IntentClassifier):
    """Fast-then-full intent classifier (see the module docstring)."""

    @classmethod
    def required_components(cls) -> List[Type]:
        return [Tokenizer]

    @staticmethod
    def get_default_config() -> Dict[Text, Any]:
        return {
            "C": 0.5,
            # Regularisation of the fast model alone (None: C).
            "fast_C": None,
            # Weight of the sentence embedding against the n-gram counts.
            "embedding_scale": 10.0,
            # Keep the fast prediction when its confidence is at least this
            # (0.8: the dev set's accuracy and crisis recall are those of 0.95,
            # with a third fewer messages embedded; see docs/benchmarks.md).
            "fast_confidence": 0.8,
            # The danger rules hand a message off whatever the classifier says:
            # do not spend the encoder on it.
            "skip_encoder_when_rules_hand_off": True,
            "use_embeddings": True,
            "ranking_length": 10,
            "random_state": 42,
            "n_jobs": 2,
        }

    def __init__(
        self,
        config: Dict[Text, Any],
        model_storage: ModelStorage,
        resource: Resource,
        features: Optional[Features] = None,
        fast: Optional[LogisticRegression] = None,
        full: Optional[LogisticRegression] = None,
        taught: Optional[Dict[str, str]] = None,
    ) -> None:
        self.config = {**self.get_default_config(), **config}
        self._model_storage = model_storage
        self._resource = resource
        self.features = features
        self.fast = fast
        self.full = full
        self.taught = taught or {}
        self._prepare_inference()

    def _prepare_inference(self) -> None:
        """Transposed, contiguous coefficients for one-row predictions.

        scikit-learn's ``predict_proba`` multiplies by ``coef_.T``, a strided
        view that scipy copies on every call (megabytes for the n-gram
        vocabulary): that copy was a tenth of the time per message.
        """
        self._fast = _Linear.of(self.fast)
        self._full = _Linear.of(self.full)
        self._detector = None

    @classmethod
    def create(
        cls,
        config: Dict[Text, Any],
        model_storage: ModelStorage,
        resource: Resource,
        execution_context: ExecutionContext,
    ) -> "TopicClassifier":
        return cls(config, model_storage, resource)

    # ------------------------------------------------------------------ training

    def _fit(self, matrix: csr_matrix, labels: List[str], C: Optional[float] = None) -> LogisticRegression:
        """One-vs-rest logistic regressions (liblinear), fitted on both cores at once."""
        from joblib import parallel_backend
        from sklearn.multiclass import OneVsRestClassifier

        # The dual formulation: far fewer examples than features, so it solves 3x faster.
        base = LogisticRegression(
            C=C or self.config["C"], solver="liblinear", dual=True, max_iter=2000, random_state=self.config["random_state"]
        )
        # Threads, not processes: liblinear releases the GIL, and processes would
        # get read-only memory-mapped copies of the matrix, which liblinear refuses.
        with parallel_backend("threading", n_jobs=self.config["n_jobs"]):
            ovr = OneVsRestClassifier(base, n_jobs=self.config["n_jobs"]).fit(matrix, labels)
        # Fold the binary models into one LogisticRegression, as liblinear's own
        # one-vs-rest would have made: predict_proba is the same.
        model = LogisticRegression(C=C or self.config["C"], solver="liblinear", multi_class="ovr")
        model.classes_ = ovr.classes_
        model.coef_ = np.vstack([e.coef_ for e in ovr.estimators_])
        model.intercept_ = np.concatenate([e.intercept_ for e in ovr.estimators_])
        return model

    def train(self, training_data: TrainingData) -> Resource:
        examples = [e for e in training_data.intent_examples if e.get(INTENT) and e.get(TEXT)]
        if not examples:
            logger.warning("TopicClassifier: no intent examples to train on")
            return self._resource
        labels = [e.get(INTENT) for e in examples]
        self.taught = taught_phrases(examples)
        self.features = Features()
        matrix = self.features.fit(examples)
        self.fast = self._fit(matrix, labels, self.config.get("fast_C"))
        if self.config["use_embeddings"]:
            embeddings = embed_training_examples([e.get(TEXT) for e in examples])
            self.full = self._fit(self._joint(matrix, embeddings), labels)
        self._prepare_inference()
        self.persist()
        return self._resource

    def _joint(self, matrix: csr_matrix, embeddings: np.ndarray) -> csr_matrix:
        return hstack([matrix, csr_matrix(embeddings * self.config["embedding_scale"])]).tocsr()

    def persist(self) -> None:
        """Saves plain arrays (npz) and vocabularies (JSON): quick to write, nothing to unpickle."""
        with self._model_storage.write_to(self._resource) as directory:
            (directory / "vocabularies.json").write_text(json.dumps(self.features.vocabularies()), encoding="utf-8")
            (directory / "taught.json").write_text(json.dumps(self.taught, sort_keys=True), encoding="utf-8")
            for name, model in (("fast", self.fast), ("full", self.full)):
                if model is not None:
                    np.savez(directory / f"{name}.npz", coef=model.coef_, intercept=model.intercept_, classes=model.classes_.astype(str))

    @classmethod
    def load(
        cls,
        config: Dict[Text, Any],
        model_storage: ModelStorage,
        resource: Resource,
        execution_context: ExecutionContext,
        **kwargs: Any,
    ) -> "TopicClassifier":
        def read(path: Path) -> Optional[LogisticRegression]:
            if not path.exists():
                return None
            with np.load(path, allow_pickle=False) as arrays:
                model = LogisticRegression(solver="liblinear", multi_class="ovr")
                model.coef_, model.intercept_ = arrays["coef"], arrays["intercept"]
                model.classes_ = arrays["classes"].astype(object)
            return model

        try:
            with model_storage.read_from(resource) as directory:
                vocabularies = json.loads((directory / "vocabularies.json").read_text(encoding="utf-8"))
                features = Features(vocabularies["words"], vocabularies["chars"])
                taught_path = directory / "taught.json"  # not in models trained before it existed
                taught = json.loads(taught_path.read_text(encoding="utf-8")) if taught_path.exists() else {}
                loaded = cls(config, model_storage, resource, features, read(directory / "fast.npz"),
                             read(directory / "full.npz"), taught)
        except (ValueError, FileNotFoundError):
            return cls(config, model_storage, resource)
        if loaded.full is not None:
            from bot.nlu.sentence_encoder import shared_encoder

            shared_encoder()  # now, not on the first visitor's unclear message (a second's wait)
        return loaded

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
        if not (message.get(TEXT) or "").strip():
            return []
        row = self.features.row(message)
        if row.nnz == 0:
            return []
        n_sparse = self.features.width()
        probabilities = self._fast.proba(row, n_sparse)
        classes = self._fast.classes
        taught = self._fast.index.get(self.taught.get(taught_key(message.get(TEXT))))
        if taught is not None:  # taught word for word: answered as taught, no encoder
            probabilities[taught] = 1.0
        else:
            unsure = probabilities.max() < self.config["fast_confidence"]
            crisis = classes[int(np.argmax(probabilities))] == CRISIS_INTENT
            # A crisis guess deserves the better model, unless the danger rules hand
            # the message off anyway (then the classifier's answer is not used).
            if (unsure or crisis) and self._full is not None and not self._rules_hand_off(message.get(TEXT)):
                embedding = embed_message(message.get(TEXT)) * self.config["embedding_scale"]
                probabilities = self._full.proba(row, n_sparse, embedding)
                classes = self._full.classes
            if not self.features.knows_a_word(message):
                # Not one word the bot has seen ("zxqv blorp", another alphabet): whatever
                # the character n-grams suggest, the bot should not be sure of it.
                probabilities = probabilities * UNKNOWN_WORDS_DISCOUNT
        order = np.argsort(-probabilities)
        return [{"name": str(classes[i]), "confidence": float(probabilities[i])} for i in order]

    def _rules_hand_off(self, text: str) -> bool:
        if not self.config["skip_encoder_when_rules_hand_off"]:
            return False
        if self._detector is None:
            from bot.danger import load_detector

            self._detector = load_detector()  # the same instance as CrisisOverride's
        return self._detector.detect(text or "") is not None


def _vocabulary(vectorizer: CountVectorizer) -> Dict[str, int]:
    return vectorizer.vocabulary_ if hasattr(vectorizer, "vocabulary_") else vectorizer.vocabulary


class SparseRow:
    """The feature columns of one message that are not zero, and their counts."""

    __slots__ = ("indices", "counts")

    def __init__(self, indices: np.ndarray, counts: np.ndarray) -> None:
        self.indices = indices
        self.counts = counts

    @property
    def nnz(self) -> int:
        return int(self.indices.size)


class _Linear:
    """A one-vs-rest logistic regression at prediction time (same probabilities as scikit-learn's)."""

    def __init__(self, coef: np.ndarray, intercept: np.ndarray, classes: np.ndarray) -> None:
        self.coef_t = np.ascontiguousarray(np.asarray(coef, dtype=np.float64).T)
        self.intercept = np.asarray(intercept, dtype=np.float64)
        self.classes = classes
        self.index = {str(name): i for i, name in enumerate(classes)}

    @classmethod
    def of(cls, model: Optional[LogisticRegression]) -> Optional["_Linear"]:
        return None if model is None else cls(model.coef_, model.intercept_, model.classes_)

    def proba(self, row: SparseRow, n_sparse: int, dense: Optional[np.ndarray] = None) -> np.ndarray:
        """Probabilities for one message's ``n_sparse`` count features, with ``dense`` columns
        appended after them (the embedding)."""
        scores = row.counts @ self.coef_t[row.indices] + self.intercept
        if dense is not None:
            scores += np.asarray(dense, dtype=np.float64).ravel() @ self.coef_t[n_sparse:]
        probabilities = expit(scores)
        total = probabilities.sum()
        return probabilities / total if total > 0 else probabilities


# ---------------------------------------------------------------------- embeddings


def _cache_path() -> Path:
    return paths.cache_dir() / "sentence-embeddings.npz"


def _read_cache() -> Dict[str, np.ndarray]:
    path = _cache_path()
    if not path.exists():
        return {}
    try:
        with np.load(path, allow_pickle=False) as stored:
            keys, vectors = stored["keys"], stored["vectors"]
    except (KeyError, ValueError, OSError):  # an old or broken cache: rebuild it
        return {}
    return {str(k): v for k, v in zip(keys, vectors)}


def embed_training_examples(texts: Iterable[str]) -> np.ndarray:
    """Embeddings of training examples, cached on disk so that retraining reuses them.

    (Visitors' messages are never cached: only training examples pass here.)
    """
    from bot.nlu.sentence_encoder import shared_encoder

    texts = list(texts)
    cached = _read_cache()
    keys = [hashlib.sha1(t.encode("utf-8")).hexdigest() for t in texts]
    missing = sorted({k: t for k, t in zip(keys, texts) if k not in cached}.items())
    if missing:
        logger.info("TopicClassifier: embedding %d new training examples", len(missing))
        vectors = shared_encoder().encode([t for _, t in missing])
        cached.update({k: v for (k, _), v in zip(missing, vectors)})
        _cache_path().parent.mkdir(parents=True, exist_ok=True)
        names = sorted(cached)
        np.savez(_cache_path(), keys=np.array(names), vectors=np.vstack([cached[k] for k in names]))
    return np.vstack([cached[k] for k in keys])


def embed_message(text: str) -> np.ndarray:
    from bot.nlu.sentence_encoder import shared_encoder

    return shared_encoder().encode([text])
