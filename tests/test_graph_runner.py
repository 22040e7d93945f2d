"""The sequential graph runner gives exactly what Rasa's dask runner gives, for whole conversations."""
from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any, List

import pytest

import bot.channels  # noqa: F401  (installs the runner, as every server does)
from bot.graph_runner import SequentialGraphRunner, execution_order

pytestmark = pytest.mark.slow

CONVERSATION = ["hi", "why do i miss him", "/trauma_bond", "zxqv blorp", "he has a gun", "thank you",
                "i still think about going back to her", "¿por qué lo extraño?", "", "bye"]


def dask_twin(runner: SequentialGraphRunner) -> Any:
    from rasa.engine.runner.dask import DaskGraphRunner

    twin = DaskGraphRunner.__new__(DaskGraphRunner)
    twin._graph_schema = runner._graph_schema
    twin._instantiated_nodes = runner._instantiated_nodes
    twin._execution_context = runner._execution_context
    return twin


async def replies(agent: Any, sender: str) -> List[Any]:
    from rasa.core.channels.channel import CollectingOutputChannel, UserMessage

    turns = []
    for text in CONVERSATION:
        out = CollectingOutputChannel()
        await agent.handle_message(UserMessage(text, out, sender))
        parsed = await agent.parse_message(text)
        turns.append(([{k: v for k, v in m.items() if k != "recipient_id"} for m in out.messages],
                      parsed["intent"], parsed.get("intent_ranking")))
    return turns


def test_same_replies_and_parses_as_the_dask_runner(model_path: Path) -> None:
    from rasa.core.agent import load_agent
    from rasa.core.tracker_store import InMemoryTrackerStore
    from rasa.core.utils import AvailableEndpoints

    async def compare() -> None:
        agent = await load_agent(model_path=str(model_path), endpoints=AvailableEndpoints())
        agent.tracker_store = agent.processor.tracker_store = InMemoryTrackerStore(agent.domain)
        runner = agent.processor.graph_runner
        assert isinstance(runner, SequentialGraphRunner)
        ours = await replies(agent, f"seq-{uuid.uuid4().hex}")
        agent.processor.graph_runner = dask_twin(runner)
        theirs = await replies(agent, f"dask-{uuid.uuid4().hex}")
        assert ours == theirs

    asyncio.run(compare())


def test_the_order_puts_every_node_after_what_it_needs(model_path: Path) -> None:
    from rasa.engine.storage.local_model_storage import LocalModelStorage
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        _, metadata = LocalModelStorage.from_model_archive(Path(tmp), model_path)
    for schema in (metadata.predict_schema,):
        order = execution_order(schema)
        seen = set()
        for name, needs in order:
            assert all(n in seen for n in needs if n in schema.nodes), name
            seen.add(name)
        assert seen == set(schema.nodes)
