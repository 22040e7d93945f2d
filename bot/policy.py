"""Rasa's RulePolicy without the work it repeats for every prediction.

For every prediction (about three a message) Rasa 3.6's RulePolicy rebuilds
the dialogue state of every earlier turn by replaying the whole conversation,
twice (once for the message's text, once for its intent), and then checks
every rule against every one of those states. The cost grows with the length
of the conversation and was the biggest share of a message's time. This
subclass predicts exactly what RulePolicy predicts (it *is* RulePolicy: same
training, same rules, same contradiction checks, same name in the events),
with two caches:

- which rules can apply depends only on the last few states (as many as the
  longest rule has), so only those states are made; which rules fit the
  last state depends only on the features the rules mention, so that is
  remembered for those features, and the few rules left are checked
  against the earlier states;
- those states are kept with the conversation's tracker and brought up to
  date with the events appended since the last prediction, instead of being
  rebuilt from the start; an event that rewrites history (restart, new
  session, rewind, loops) rebuilds them as Rasa does.

``tests/test_rule_policy.py`` compares its predictions with Rasa's own on
thousands of generated conversations, rewinds and restarts included.
"""
from __future__ import annotations

import itertools
import json
from collections import OrderedDict, deque
from typing import Any, Deque, Dict, FrozenSet, List, Optional, Set, Text, Tuple

from rasa.core.featurizers.tracker_featurizers import MaxHistoryTrackerFeaturizer
from rasa.core.policies.policy import SupportedData
from rasa.core.policies.rule_policy import RULES, RULES_FOR_LOOP_UNHAPPY_PATH
from rasa.core.policies.rule_policy import RulePolicy as RasaRulePolicy
from rasa.engine.recipes.default_recipe import DefaultV1Recipe
from rasa.engine.storage.resource import Resource
from rasa.shared.core.generator import TrackerWithCachedStates
from rasa.shared.core.domain import Domain, State
from rasa.shared.core.events import (
    ActionExecuted,
    ActionReverted,
    ActiveLoop,
    Event,
    Restarted,
    SessionStarted,
    UserUtteranceReverted,
)
from rasa.shared.core.trackers import DialogueStateTracker

#: Events after which Rasa's ``applied_events`` is not the old list plus the new events.
_REWRITES_HISTORY = (Restarted, SessionStarted, ActionReverted, UserUtteranceReverted, ActiveLoop)
_CACHE_ATTRIBUTE = "_bot_dialogue_states"
_MEMO_SIZE = 20_000


class _States:
    """The last states of one tracker (before each action) and a tracker replayed up to its end."""

    __slots__ = ("domain", "consumed", "last_event", "replay", "states", "incremental", "current")

    def __init__(self, tracker: DialogueStateTracker, domain: Domain, keep: int) -> None:
        self.domain = domain
        self.replay = tracker.init_copy()
        self.states: Deque[State] = deque(maxlen=keep)
        self.consumed = 0
        self.last_event: Optional[Event] = None
        self.current: Optional[State] = None  # the state after the last event, made when first asked for
        # Rasa undoes repeated loop executions in ``applied_events``: with loops, always rebuild.
        self.incremental = not any(isinstance(e, ActiveLoop) for e in tracker.events)
        for event in tracker.applied_events():
            self._apply(event)
        self._mark(tracker)

    def _apply(self, event: Event) -> None:
        # As Domain.states_for_tracker_history: the state before each action.
        if isinstance(event, ActionExecuted):
            self.states.append(self.current or self.domain.get_active_state(self.replay))
        self.replay.update(event)
        self.current = None

    def _mark(self, tracker: DialogueStateTracker) -> None:
        self.consumed = len(tracker.events)
        self.last_event = tracker.events[-1] if tracker.events else None

    def extend(self, tracker: DialogueStateTracker) -> bool:
        """Takes the events appended since last time; False if they cannot simply be appended."""
        events = tracker.events
        if not self.incremental or len(events) < self.consumed:
            return False
        if self.consumed and events[self.consumed - 1] is not self.last_event:
            return False  # not the same history (events dropped at the front, or another tracker)
        new = list(itertools.islice(events, self.consumed, None))
        if any(isinstance(e, _REWRITES_HISTORY) for e in new):
            return False
        for event in new:
            self._apply(event)
        self._mark(tracker)
        return True


def recent_states(tracker: DialogueStateTracker, domain: Domain, last: int) -> List[State]:
    """The last ``last`` states of ``tracker.past_states(domain)``, kept with the tracker and brought up to date.

    Returns fresh dictionaries: Rasa's featurizer edits the states in place.
    """
    if last < 1:
        raise ValueError("at least the current state is needed")
    cache: Optional[_States] = getattr(tracker, _CACHE_ATTRIBUTE, None)
    if cache is None or cache.domain is not domain or cache.states.maxlen != last - 1 or not cache.extend(tracker):
        cache = _States(tracker, domain, keep=last - 1)
        setattr(tracker, _CACHE_ATTRIBUTE, cache)
    if cache.current is None:
        cache.current = domain.get_active_state(cache.replay)
    states = [_copy_state(s) for s in cache.states]
    states.append(_copy_state(cache.current))
    return states


def _copy_state(state: State) -> State:
    return {kind: dict(sub) if isinstance(sub, dict) else sub for kind, sub in state.items()}


@DefaultV1Recipe.register(
    DefaultV1Recipe.ComponentType.POLICY_WITHOUT_END_TO_END_SUPPORT, is_trainable=True
)
class RulePolicy(RasaRulePolicy):
    """RulePolicy with incremental dialogue states and remembered rule matches (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._possible_keys: "OrderedDict[Tuple[int, Text], FrozenSet[Text]]" = OrderedDict()
        self._depths: Dict[int, Tuple[Dict[Text, Text], int, FrozenSet[Tuple[Text, Text]]]] = {}
        self._training = False

    def train(
        self,
        training_trackers: List[TrackerWithCachedStates],
        domain: Domain,
        **kwargs: Any,
    ) -> Resource:
        # Training edits the lookup while it checks the rules: nothing is remembered meanwhile.
        self._training = True
        try:
            return super().train(training_trackers, domain, **kwargs)
        finally:
            self._training = False
            self._possible_keys.clear()
            self._depths.clear()

    def _prediction_states(
        self,
        tracker: DialogueStateTracker,
        domain: Domain,
        use_text_for_last_user_input: bool = False,
        rule_only_data: Optional[Dict[Text, Any]] = None,
    ) -> List[State]:
        featurizer = self.featurizer
        if (
            self._training
            or type(featurizer) is not MaxHistoryTrackerFeaturizer
            or featurizer.max_history is not None
            or self.supported_data() == SupportedData.ML_DATA
        ):
            return super()._prediction_states(tracker, domain, use_text_for_last_user_input, rule_only_data)
        # What MaxHistoryTrackerFeaturizer.prediction_states does with tracker.past_states,
        # for the states that can still decide a rule (see _get_possible_keys).
        states = recent_states(tracker, domain, self._tail_length())
        featurizer._choose_last_user_input([states], use_text_for_last_user_input)
        return states

    def _tail_length(self) -> int:
        lookups = [self.lookup.get(RULES) or {}, self.lookup.get(RULES_FOR_LOOP_UNHAPPY_PATH) or {}]
        return max([1] + [self._depth(lookup) for lookup in lookups if lookup])

    def _shape(self, lookup: Dict[Text, Text]) -> Tuple[int, FrozenSet[Tuple[Text, Text]]]:
        """How many states the longest rule of ``lookup`` has (older states never change
        which rules apply), and which features its rules look at."""
        known = self._depths.get(id(lookup))
        if known is not None and known[0] is lookup:
            return known[1], known[2]
        depth, used = 0, set()
        for key in lookup:
            states = self._rule_key_to_state(key)
            depth = max(depth, len(states))
            used.update((kind, name) for state in states for kind, sub in state.items() for name in sub)
        self._depths[id(lookup)] = (lookup, depth, frozenset(used))
        return depth, frozenset(used)

    def _depth(self, lookup: Dict[Text, Text]) -> int:
        return self._shape(lookup)[0]

    def _get_possible_keys(self, lookup: Dict[Text, Text], states: List[State]) -> Set[Text]:
        if self._training or not lookup:
            return super()._get_possible_keys(lookup, states)
        # RulePolicy._is_rule_applicable is True for every turn beyond a rule's
        # length, so only the last `depth` states decide the result. Rasa
        # filters every rule by the last state, then what is left by the state
        # before, and so on. The first filter (over all rules) depends only on
        # the features of the last state that some rule looks at (the message's
        # text, say, is in no rule) and whether each part is there at all: it
        # is remembered for them. What it leaves is a few rules, filtered by
        # the earlier states as Rasa does. (Remembering whole tails missed one
        # time in seven: they combine the last few messages' intents.)
        depth, used = self._shape(lookup)
        tail = states[-depth:]
        if not tail:
            return set(lookup)
        last = tail[-1]
        seen = {kind: {n: v for n, v in sub.items() if (kind, n) in used} or {"": True} for kind, sub in last.items() if sub}
        key = (id(lookup), json.dumps(seen, sort_keys=True, default=str))
        possible = self._possible_keys.get(key)
        if possible is None:
            possible = frozenset(k for k in lookup if self._is_rule_applicable(k, 0, last))
            self._possible_keys[key] = possible
            if len(self._possible_keys) > _MEMO_SIZE:
                self._possible_keys.popitem(last=False)
        for turn, state in enumerate(reversed(tail[:-1]), start=1):
            if not possible:
                break
            possible = [k for k in possible if self._is_rule_applicable(k, turn, state)]
        return set(possible)
