"""A graph runner that calls the model's nodes in a fixed order, without dask.

Rasa runs the prediction graph three or four times per message (NLU, then one
policy prediction per bot action). Its ``DaskGraphRunner`` rebuilds the
minimal graph and hands it to dask's scheduler each time, and formats the
whole input (the tracker) into a debug string that is then thrown away. The
graph of a trained model never changes, so this runner works out each
target set's order once and then only calls the nodes. Same nodes, same
inputs, same results (``tests/test_graph_runner.py`` compares the two).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Text, Tuple

from rasa.engine.exceptions import GraphRunError
from rasa.engine.graph import GraphSchema
from rasa.engine.runner.dask import DaskGraphRunner

Plan = List[Tuple[Text, List[Text]]]


def execution_order(schema: GraphSchema) -> Plan:
    """Each node after the nodes it needs (depth-first topological order)."""
    order: Plan = []
    done: Dict[Text, bool] = {}

    def visit(name: Text, path: Tuple[Text, ...]) -> None:
        if done.get(name):
            return
        if name in path:
            raise GraphRunError(f"the graph has a cycle through '{name}'")
        node = schema.nodes[name]
        for needed in node.needs.values():
            if needed in schema.nodes:
                visit(needed, path + (name,))
        done[name] = True
        order.append((name, list(node.needs.values())))

    for name in schema.nodes:
        visit(name, ())
    return order


class SequentialGraphRunner(DaskGraphRunner):
    """``DaskGraphRunner`` with a cached plan per target set and no scheduler."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from bot.without_tensorflow import check_components

        graph_schema = kwargs.get("graph_schema", args[0] if args else None)
        if graph_schema is not None:
            check_components([node.uses for node in graph_schema.nodes.values()])
        super().__init__(*args, **kwargs)
        self._plans: Dict[Tuple[Text, ...], Plan] = {}

    def _plan(self, targets: List[Text]) -> Plan:
        key = tuple(targets)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = execution_order(self._graph_schema.minimal_graph_schema(targets))
        return plan

    def run(self, inputs: Optional[Dict[Text, Any]] = None, targets: Optional[List[Text]] = None) -> Dict[Text, Any]:
        run_targets = list(targets) if targets else list(self._graph_schema.target_names)
        plan = self._plan(run_targets)
        names = {name for name, _ in plan}
        # As in the dask graph: an input is the pair (input name, value).
        values: Dict[Text, Any] = {}
        for input_name, input_value in (inputs or {}).items():
            if isinstance(input_value, str) and input_value in names:
                raise GraphRunError(
                    f"Input value '{input_value}' clashes with a node name. Make sure that none of the "
                    f"input names passed to the `run` method are the same as node names in the graph schema."
                )
            values[input_name] = (input_name, input_value)
        try:
            for name, needs in plan:
                values[name] = self._instantiated_nodes[name](*(values[n] if n in values else n for n in needs))
        except RuntimeError as exc:
            raise GraphRunError("Error running runner.") from exc
        return dict(values[t] for t in run_targets)


def install() -> None:
    """Makes Rasa's message processor load models with this runner."""
    from rasa.core import processor

    processor.DaskGraphRunner = SequentialGraphRunner  # type: ignore[misc]
