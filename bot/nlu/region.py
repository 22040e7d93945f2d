"""Tags each message with the hotline region, so handoffs show the right numbers.

The widget may say which region its organisation serves (``region`` in the
message metadata); otherwise the server's ``BOT_REGION`` setting applies. The
region becomes an entity, the ``region`` slot picks it up, and the crisis
response variation for that region is chosen without the action server.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Text

from rasa.engine.graph import ExecutionContext, GraphComponent
from rasa.engine.recipes.default_recipe import DefaultV1Recipe
from rasa.engine.storage.resource import Resource
from rasa.engine.storage.storage import ModelStorage
from rasa.shared.nlu.constants import ENTITIES, TEXT
from rasa.shared.nlu.training_data.message import Message

from bot.hotlines import configured_region_id, regions

REGION_ENTITY = "region"


@DefaultV1Recipe.register(
    [DefaultV1Recipe.ComponentType.ENTITY_EXTRACTOR], is_trainable=False
)
class RegionTagger(GraphComponent):
    """Adds a ``region`` entity from the message metadata or the server setting."""

    def __init__(self, config: Dict[Text, Any]) -> None:
        self.default = configured_region_id()
        self.known = set(regions())

    @classmethod
    def create(
        cls,
        config: Dict[Text, Any],
        model_storage: ModelStorage,
        resource: Resource,
        execution_context: ExecutionContext,
    ) -> "RegionTagger":
        return cls(config)

    def region_for(self, metadata: Optional[Dict[str, Any]]) -> str:
        wanted = None
        if isinstance(metadata, dict):
            wanted = metadata.get("region")
            custom = metadata.get("customData")
            if wanted is None and isinstance(custom, dict):
                wanted = custom.get("region")
        if isinstance(wanted, str) and wanted.strip().lower() in self.known:
            return wanted.strip().lower()
        return self.default

    def process(self, messages: List[Message]) -> List[Message]:
        for message in messages:
            region = self.region_for(message.get("metadata"))
            entities = [e for e in message.get(ENTITIES) or [] if e.get("entity") != REGION_ENTITY]
            entities.append(
                {
                    "entity": REGION_ENTITY,
                    "value": region,
                    "start": 0,
                    "end": len(message.get(TEXT) or ""),
                    "confidence": 1.0,
                    "extractor": "RegionTagger",
                }
            )
            message.set(ENTITIES, entities, add_to_output=True)
        return messages
