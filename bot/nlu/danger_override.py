"""The crisis override: a Rasa NLU component that puts danger before everything else.

It runs last in the pipeline. When the danger detector recognises a crisis,
or the trained ``crisis`` intent comes out on top (the second net), the
message's intent becomes ``crisis`` with full confidence, whatever the
classifier or the fallback said, and the category and language are added as
entities so that the slot mappings pick the right handoff response without
any call to the action server.

The second net is a bag of words: it knows that "killing", "choked" and
"hit" appear in crisis examples, not that "this breakup is killing me" is a
figure of speech. So its guess does not overrule the advocates' rules when
they saw the danger words and judged them harmless (figure of speech,
negated, in the past).
"""
from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional, Text

from rasa.engine.graph import ExecutionContext, GraphComponent
from rasa.engine.recipes.default_recipe import DefaultV1Recipe
from rasa.engine.storage.resource import Resource
from rasa.engine.storage.storage import ModelStorage
from rasa.shared.nlu.constants import (
    ENTITIES,
    INTENT,
    INTENT_NAME_KEY,
    INTENT_RANKING_KEY,
    PREDICTED_CONFIDENCE_KEY,
    TEXT,
)
from rasa.shared.nlu.training_data.message import Message

from bot.danger import load_detector
from bot.danger.detector import DangerDetector
from bot.danger.normalise import first_language_guess

logger = logging.getLogger(__name__)

CRISIS_INTENT = "crisis"
FALLBACK_INTENT = "nlu_fallback"
CATEGORY_ENTITY = "crisis_category"
LANGUAGE_ENTITY = "language"
#: Category when only the classifier saw danger: assume the most urgent reading.
UNSPECIFIED_CATEGORY = "imminent_danger"
SPANISH_MARKERS = {
    "que", "de", "la", "el", "mi", "mis", "me", "no", "y", "en", "por", "con", "es", "esta",
    "para", "una", "un", "lo", "se", "pero", "ya", "muy", "tengo", "quiero", "estoy", "ayuda",
    "porque", "como", "cuando", "donde", "su", "sus", "le", "les", "nos", "hoy", "anoche",
}


@DefaultV1Recipe.register(
    [DefaultV1Recipe.ComponentType.INTENT_CLASSIFIER], is_trainable=False
)
class CrisisOverride(GraphComponent):
    """Turns any message that signals danger into the ``crisis`` intent."""

    @staticmethod
    def get_default_config() -> Dict[Text, Any]:
        return {
            # Hand off when the trained crisis intent has at least this confidence and
            # is the best guess, or the message fell back (nobody is sure what it
            # is): "when unsure, hand off". Fainter crisis guesses are not acted on.
            "unsure_threshold": 0.3,
            # Same as the FallbackClassifier's threshold: used when a vetoed crisis
            # guess leaves no confident topic.
            "fallback_threshold": 0.4,
        }

    def __init__(self, config: Dict[Text, Any], detector: Optional[DangerDetector] = None) -> None:
        self.config = {**self.get_default_config(), **config}
        self.detector = detector or load_detector()

    @classmethod
    def create(
        cls,
        config: Dict[Text, Any],
        model_storage: ModelStorage,
        resource: Resource,
        execution_context: ExecutionContext,
    ) -> "CrisisOverride":
        return cls(config)

    def process(self, messages: List[Message]) -> List[Message]:
        for message in messages:
            self.process_one(message)
        return messages

    def process_one(self, message: Message) -> None:
        text = message.get(TEXT) or ""
        detection = self.detector.detect(text)
        if detection:
            self._override(message, detection.category, detection.language, "detector", detection.rule_id)
            return
        source = self._classifier_crisis(message)
        if not source:
            if (message.get(INTENT) or {}).get(INTENT_NAME_KEY) == CRISIS_INTENT:
                self._demote(message)  # a crisis guess too faint to act on: the next guess, or fallback
            return
        if self.detector.explain(text).judged_safe:
            self._demote(message)
            return
        words = self.detector.normaliser.words(text)
        language = first_language_guess(words, SPANISH_MARKERS) or "en"
        self._override(message, UNSPECIFIED_CATEGORY, language, source, None)

    def _demote(self, message: Message) -> None:
        """The classifier guessed crisis where the rules saw a figure of speech: take its next guess."""
        ranking = [
            r for r in message.get(INTENT_RANKING_KEY) or []
            if r.get(INTENT_NAME_KEY) not in (CRISIS_INTENT, FALLBACK_INTENT)
        ]
        best = ranking[0] if ranking else None
        if best is None or (best.get(PREDICTED_CONFIDENCE_KEY) or 0.0) < self.config["fallback_threshold"]:
            best = {INTENT_NAME_KEY: FALLBACK_INTENT, PREDICTED_CONFIDENCE_KEY: self.config["fallback_threshold"]}
            ranking = [best, *ranking]
        message.set(INTENT, best, add_to_output=True)
        message.set(INTENT_RANKING_KEY, ranking, add_to_output=True)
        logger.debug("crisis guess of the classifier vetoed by the danger rules (figure of speech)")

    def _classifier_crisis(self, message: Message) -> Optional[str]:
        """"classifier" when the trained crisis intent is the best guess, "unsure" when it is close."""
        ranking = [
            r for r in message.get(INTENT_RANKING_KEY) or [] if r.get(INTENT_NAME_KEY) != FALLBACK_INTENT
        ]
        if not ranking:
            return None
        crisis = next((r for r in ranking if r.get(INTENT_NAME_KEY) == CRISIS_INTENT), None)
        if crisis is None:
            return None
        confidence = crisis.get(PREDICTED_CONFIDENCE_KEY) or 0.0
        if ranking[0] is crisis and confidence >= self.config["unsure_threshold"]:
            return "classifier"
        intent = (message.get(INTENT) or {}).get(INTENT_NAME_KEY)
        if intent == FALLBACK_INTENT and confidence >= self.config["unsure_threshold"]:
            return "unsure"
        return None

    @staticmethod
    def _override(
        message: Message, category: str, language: str, source: str, rule_id: Optional[str]
    ) -> None:
        crisis_confidence = next(
            (
                r.get(PREDICTED_CONFIDENCE_KEY)
                for r in message.get(INTENT_RANKING_KEY) or []
                if r.get(INTENT_NAME_KEY) == CRISIS_INTENT
            ),
            0.0,
        )
        text = message.get(TEXT) or ""
        message.set(INTENT, {INTENT_NAME_KEY: CRISIS_INTENT, PREDICTED_CONFIDENCE_KEY: 1.0}, add_to_output=True)
        ranking = [
            r for r in message.get(INTENT_RANKING_KEY) or []
            if r.get(INTENT_NAME_KEY) not in (CRISIS_INTENT, FALLBACK_INTENT)
        ]
        message.set(
            INTENT_RANKING_KEY,
            [{INTENT_NAME_KEY: CRISIS_INTENT, PREDICTED_CONFIDENCE_KEY: 1.0}, *ranking],
            add_to_output=True,
        )
        entities = [
            e for e in message.get(ENTITIES) or [] if e.get("entity") not in (CATEGORY_ENTITY, LANGUAGE_ENTITY)
        ]
        for name, value in ((CATEGORY_ENTITY, category), (LANGUAGE_ENTITY, language)):
            entities.append(
                {
                    "entity": name,
                    "value": value,
                    "start": 0,
                    "end": len(text),
                    "confidence": 1.0,
                    "extractor": "CrisisOverride",
                }
            )
        message.set(ENTITIES, entities, add_to_output=True)
        message.set(
            "danger",
            {
                "category": category,
                "language": language,
                "source": source,
                "rule": rule_id,
                "classifier_confidence": round(float(crisis_confidence or 0.0), 4),
            },
            add_to_output=True,
        )
        logger.debug("crisis override: category=%s source=%s rule=%s", category, source, rule_id)
