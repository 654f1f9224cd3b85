"""The NFA of a pattern: Flink's ``NFACompiler`` (states with TAKE / IGNORE / PROCEED edges,
built from the last pattern backwards) and Flink's ``NFA`` run over it.

The run is a pure function of a small picklable ``NFAState``: the partial matches
(``ComputationState``) and, with a skip strategy, the matches held back until no earlier
partial match can still complete. Flink keeps events in a ``SharedBuffer`` of nodes with
Dewey versions; here each partial match holds an immutable tuple of its
``(pattern name, event id, event)`` entries. Branches share the tuples' events by reference
(pickle keeps the sharing), which is what the SharedBuffer buys, without the versions.
Event ids are ``(timestamp, sequence)``, ordered as Flink's ``EventId``.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

from .conditions import AndCondition, NotCondition, event_test
from .pattern import ConsumingStrategy as CS
from .pattern import MalformedPatternException, Pattern

ENDING_STATE_NAME = "$endState$"
TAKE, IGNORE, PROCEED = "TAKE", "IGNORE", "PROCEED"
START, NORMAL, FINAL, STOP = "Start", "Normal", "Final", "Stop"


def _true(value, ctx) -> bool:
    return True


def _false(value, ctx) -> bool:
    return False


class StateTransition(NamedTuple):
    action: str
    source: "State"
    target: "State"
    condition: Any  # None: always


class State:
    """A state of the compiled NFA; ``name`` is unique ("a", "a:0", ...), ``pattern`` is the
    pattern's name (the key of its events in a match)."""
    __slots__ = ("name", "pattern", "kind", "transitions")

    def __init__(self, name: str, pattern: str, kind: str):
        self.name, self.pattern, self.kind, self.transitions = name, pattern, kind, []

    def add(self, action: str, target: Optional["State"], condition) -> None:
        self.transitions.append(StateTransition(action, self, target or self, condition))

    def add_take(self, target, condition) -> None:
        self.add(TAKE, target, condition)

    def add_ignore(self, target, condition) -> None:
        self.add(IGNORE, target, condition)

    def add_proceed(self, target, condition) -> None:
        self.add(PROCEED, target, condition)

    def __repr__(self) -> str:
        edges = ", ".join(f"{t.action}->{t.target.name}" for t in self.transitions)
        return f"State({self.name}, {self.kind}, [{edges}])"


# -- the compiler ------------------------------------------------------------------------------

class _Compiler:
    """Flink's NFACompiler.NFAFactoryCompiler, step for step (greedy loops with ``until`` are
    simplified: the loop proceeds when the event is not taken)."""

    def __init__(self, last: Pattern):
        self.states: list[State] = []
        self.used_names: set[str] = set()
        self.stop_states: dict[str, State] = {}
        self.current_pattern = last
        self.following_pattern: Optional[Pattern] = None
        self.current_group: Optional[Pattern] = None
        self.first_of_loop = False

    def compile(self) -> "NFA":
        last = self.current_pattern
        _check_names(last, set())
        _check_skip_strategy(last)
        if last.quantifier.consuming_strategy == CS.NOT_FOLLOW:
            raise MalformedPatternException("NotFollowedBy is not supported as a last part of a Pattern!")
        if last.quantifier.greedy:
            raise MalformedPatternException(
                "Greedy quantifiers are not allowed as the last element of a Pattern yet. Finish your pattern "
                "with either a simple variable or reluctant quantifier.")
        sink = self._state(ENDING_STATE_NAME, FINAL)
        sink = self._middle_states(sink)
        start = self._convert_pattern(sink)
        start.kind = START
        return NFA(self.states, start, _window(last), last.skip_strategy)

    def _state(self, pattern: str, kind: str) -> State:
        name, n = pattern, 0
        while name in self.used_names:
            name, n = f"{pattern}:{n}", n + 1
        self.used_names.add(name)
        state = State(name, pattern, kind)
        self.states.append(state)
        return state

    def _stop_state(self, condition, pattern: str) -> State:
        # One stop state per NOT pattern: every state that may stop points to it.
        stop = self.stop_states.get(pattern)
        if stop is None:
            stop = self._state(pattern, STOP)
            stop.add_take(None, condition)
            self.stop_states[pattern] = stop
        return stop

    def _middle_states(self, sink: State) -> State:
        last_sink = sink
        while self.current_pattern.previous is not None:
            p = self.current_pattern
            strategy = p.quantifier.consuming_strategy
            if strategy == CS.NOT_FOLLOW:
                pass  # becomes stop edges of the states around it
            elif strategy == CS.NOT_NEXT:
                not_next = self._state(p.name, NORMAL)
                not_condition = p.condition
                stop = self._stop_state(not_condition, p.name)
                if last_sink.kind == FINAL:  # an ignore, so that reaching the end does not fire on this event
                    not_next.add_ignore(last_sink, _not(not_condition))
                else:
                    not_next.add_proceed(last_sink, _not(not_condition))
                not_next.add_proceed(stop, not_condition)
                last_sink = not_next
            else:
                last_sink = self._convert_pattern(last_sink)
            self.following_pattern = p
            self.current_pattern = p.previous
        return last_sink

    def _convert_pattern(self, sink: State) -> State:
        p = self.current_pattern
        if p.quantifier.kind == "LOOPING":
            # once the loop has started, NOT patterns before an optional loop no longer apply
            self.first_of_loop = False
            looping = self._looping(self._copy_without_transitive_nots(sink))
            self.first_of_loop = True
            last = self._times_state(looping, sink, p.times_range)
        elif p.quantifier.kind == "TIMES":
            last = self._times_state(sink, sink, p.times_range)
        else:
            last = self._singleton(sink, sink, p.condition, self._ignore_condition(p), p.quantifier.optional)
        self._add_stop_states(last)
        return last

    def _times_state(self, sink: State, proceed: State, times) -> State:
        p = self.current_pattern
        last = sink
        self.first_of_loop = False
        until = p.until_condition
        inner_ignore = _with_until(self._inner_ignore_condition(p), until, False)
        take = _with_until(p.condition, until, True)
        for _ in range(times.from_, times.to):
            last = self._singleton(last, proceed, take, inner_ignore, True)
            self._add_stop_state_to_looping(last)
        for _ in range(times.from_ - 1):
            last = self._singleton(last, None, take, inner_ignore, False)
            self._add_stop_state_to_looping(last)
        self.first_of_loop = True
        return self._singleton(last, proceed, take, self._ignore_condition(p), p.quantifier.optional)

    def _singleton(self, sink: State, proceed: Optional[State], take, ignore, optional: bool) -> State:
        p = self.current_pattern
        if p.group is not None:
            return self._group_state(p, sink, proceed, optional)
        state = self._state(p.name, NORMAL)
        # taking an event ends the NOT patterns before an optional state; not taking one keeps them
        taken = self._copy_without_transitive_nots(sink)
        state.add_take(taken, take)
        # the head of a group gets its proceed edge once the whole group is built
        if optional and not self._head_of_group(p):
            state.add_proceed(proceed, _not(take) if p.quantifier.greedy else None)
        if ignore is not None:
            if optional:
                ignoring = self._state(p.name, NORMAL)
                ignoring.add_take(taken, take)
                ignoring.add_ignore(None, ignore)
                self._add_stop_states(ignoring)
            else:
                ignoring = state
            state.add_ignore(ignoring, ignore)
        return state

    def _looping(self, sink: State) -> State:
        p = self.current_pattern
        if p.group is not None:
            return self._looping_group_state(p, sink)
        until = p.until_condition
        ignore = _with_until(self._inner_ignore_condition(p), until, False)
        take = _with_until(p.condition, until, True)
        looping = self._state(p.name, NORMAL)
        looping.add_proceed(sink, _not(take) if p.quantifier.greedy else None)
        looping.add_take(None, take)
        self._add_stop_state_to_looping(looping)
        if ignore is not None:
            ignoring = self._state(p.name, NORMAL)
            ignoring.add_take(looping, take)
            ignoring.add_ignore(None, ignore)
            looping.add_ignore(ignoring, ignore)
            self._add_stop_state_to_looping(ignoring)
        return looping

    def _group_state(self, group: Pattern, sink: State, proceed: Optional[State], optional: bool) -> State:
        saved = (self.current_pattern, self.following_pattern, self.current_group)
        self.current_group, self.current_pattern = group, group.group
        last = self._convert_pattern(self._middle_states(sink))
        if optional:
            last.add_proceed(proceed, None)
        self.current_pattern, self.following_pattern, self.current_group = saved
        return last

    def _looping_group_state(self, group: Pattern, sink: State) -> State:
        saved = (self.current_pattern, self.following_pattern, self.current_group)
        dummy = self._state(group.name, NORMAL)  # the end of one round, proceeding to the next
        self.current_group, self.current_pattern = group, group.group
        last = self._convert_pattern(self._middle_states(dummy))
        last.add_proceed(sink, None)
        dummy.add_proceed(last, None)
        self.current_pattern, self.following_pattern, self.current_group = saved
        return last

    def _head_of_group(self, p: Pattern) -> bool:
        return self.current_group is not None and p.previous is None

    def _ignore_condition(self, p: Pattern):
        strategy = p.quantifier.consuming_strategy
        if self._head_of_group(p):
            q = self.current_group.quantifier
            strategy = q.consuming_strategy if self.first_of_loop else q.inner_consuming_strategy
        return self._ignore_for(p, strategy)

    def _inner_ignore_condition(self, p: Pattern):
        strategy = p.quantifier.inner_consuming_strategy
        if self._head_of_group(p):
            strategy = self.current_group.quantifier.inner_consuming_strategy
        return self._ignore_for(p, strategy)

    def _ignore_for(self, p: Pattern, strategy):
        if strategy == CS.SKIP_TILL_NEXT:
            ignore = None if p.condition is None else NotCondition(p.condition)
        elif strategy == CS.SKIP_TILL_ANY:
            ignore = _true
        else:
            ignore = None
        if self.current_group is not None and self.current_group.until_condition is not None:
            ignore = _with_until(ignore, self.current_group.until_condition, False)
        return ignore

    def _current_not_conditions(self) -> list:
        """The NOT patterns before the current one, up to the first non-optional pattern."""
        nots, p = [], self.current_pattern
        while p.previous is not None and (p.previous.quantifier.optional
                                          or p.previous.quantifier.consuming_strategy == CS.NOT_FOLLOW):
            p = p.previous
            if p.quantifier.consuming_strategy == CS.NOT_FOLLOW:
                nots.append((p.condition, p.name))
        return nots

    def _add_stop_states(self, state: State) -> None:
        for condition, name in self._current_not_conditions():
            state.add_proceed(self._stop_state(condition, name), condition)

    def _add_stop_state_to_looping(self, state: State) -> None:
        f = self.following_pattern
        if f is not None and f.quantifier.consuming_strategy == CS.NOT_FOLLOW:
            state.add_proceed(self._stop_state(f.condition, f.name), f.condition)

    def _copy_without_transitive_nots(self, sink: State) -> State:
        nots = self._current_not_conditions()
        if not nots or not self.current_pattern.quantifier.optional:
            return sink
        names = {name for _, name in nots}
        copy = self._state(sink.pattern, sink.kind)
        for t in sink.transitions:
            if t.action == PROCEED:
                if t.target.kind == STOP:
                    if t.target.pattern in names:
                        continue
                    target = t.target
                else:
                    target = self._copy_without_transitive_nots(t.target)
                copy.add(PROCEED, target, t.condition)
            else:
                copy.add(t.action, copy if t.target is t.source else t.target, t.condition)
        return copy


def _not(condition):
    return _false if condition is None else NotCondition(condition)


def _with_until(condition, until, is_take: bool):
    if until is not None and condition is not None:
        return AndCondition(NotCondition(until), condition)
    if until is not None and is_take:
        return NotCondition(until)
    return condition


def _check_names(p: Optional[Pattern], seen: set) -> None:
    while p is not None:
        if p.group is not None:
            _check_names(p.group, seen)
        else:
            if p.name in seen or p.name == ENDING_STATE_NAME:
                raise MalformedPatternException(f"Duplicate pattern name: {p.name}. Names must be unique.")
            seen.add(p.name)
        p = p.previous


def _all_names(p: Optional[Pattern]) -> list:
    names = []
    while p is not None:
        names += _all_names(p.group) if p.group is not None else [p.name]
        p = p.previous
    return names


def _check_skip_strategy(last: Pattern) -> None:
    name = last.skip_strategy.get_pattern_name()
    if name is not None and name not in _all_names(last):
        raise MalformedPatternException(
            f"The pattern name specified in AfterMatchSkipStrategy can not be found in the given Pattern "
            f"('{name}' is not one of {_all_names(last)[::-1]})")


def _window(p: Optional[Pattern]) -> int:
    """The smallest ``within`` of the sequence (0: none)."""
    windows = []
    while p is not None:
        if p.window_ms:
            windows.append(p.window_ms)
        p = p.previous
    return min(windows, default=0)


# -- the run -----------------------------------------------------------------------------------

class ComputationState(NamedTuple):
    """A partial match: the NFA state it is in and the events it took."""
    state: str
    path: tuple = ()                 # ((pattern name, event id, event), ...)
    start_id: Optional[tuple] = None  # the first event's id; None in the start state
    previous_ts: Optional[int] = None

    def sort_key(self):
        # Flink's COMPUTATION_STATE_COMPARATOR: by start event, the start state last
        return (0, self.start_id) if self.start_id is not None else (1,)


class NFAState(NamedTuple):
    """What an NFA keeps per key: small, immutable, picklable."""
    partial_matches: tuple
    completed_matches: tuple = ()  # held back by a skip strategy until no earlier partial match is left
    next_sequence: int = 0


class _ConditionContext:
    """The ``ctx`` of an IterativeCondition: the events of the partial match being extended."""
    __slots__ = ("_cs", "_ts")

    def __init__(self, computation_state: ComputationState, timestamp: int):
        self._cs, self._ts = computation_state, timestamp

    def get_events_for_pattern(self, name: str) -> list:
        return [event for pattern, _, event in self._cs.path if pattern == name]

    def timestamp(self) -> int:
        return self._ts


def materialize(cs: ComputationState) -> dict:
    match: dict = {}
    for pattern, _, event in cs.path:
        match.setdefault(pattern, []).append(event)
    return match


def _event_ids(cs: ComputationState) -> dict:
    ids: dict = {}
    for pattern, event_id, _ in cs.path:
        ids.setdefault(pattern, []).append(event_id)
    return ids


def _sort_key(cs: ComputationState):
    return (0, cs.start_id) if cs.start_id is not None else (1,)


def _first_start(nfa_state) -> Optional[tuple]:
    """The earliest start event's id of the partial matches, None when none has started: a state's
    partial matches are kept in ``_sort_key`` order, the earliest start first."""
    partial = nfa_state.partial_matches
    return partial[0].start_id if partial else None


class _Edge:
    """A transition compiled for the run: its condition a call of the event alone when it reads
    no context (``event_test``), its target a ``_Node``."""
    __slots__ = ("action", "test", "with_ctx", "target", "pattern")

    def __init__(self, transition: StateTransition):
        self.action, self.pattern = transition.action, transition.source.pattern
        condition = transition.condition
        if condition is _true:
            self.test, self.with_ctx = None, False
        elif condition is _false:
            self.test, self.with_ctx = _never, False
        else:
            self.test, self.with_ctx = event_test(condition)
        self.target = None


class _Node:
    """A state compiled for the run: its edges, and the PROCEED edges alone (a state without
    any needs no search for a final state behind it)."""
    __slots__ = ("name", "kind", "edges", "proceeds", "plain")

    def __init__(self, state: State):
        self.name, self.kind = state.name, state.kind
        self.edges = tuple(_Edge(t) for t in state.transitions)
        self.proceeds = tuple(e for e in self.edges if e.action == PROCEED)
        # no PROCEED edge and no condition reading the context: its edges are one filter
        self.plain = not self.proceeds and not any(e.with_ctx for e in self.edges)


def _never(value) -> bool:
    return False


def _holds(edge: _Edge, event, ctx) -> bool:
    try:
        return bool(edge.test(event, ctx) if edge.with_ctx else edge.test(event))
    except Exception as e:
        raise RuntimeError(f"Failure happened in filter function of pattern '{edge.pattern}' "
                           f"({edge.action} edge) on event {event!r}: {e}") from e


class NFA:
    """The compiled pattern and its run. States are compiled once into nodes whose edges call
    their conditions directly; a key's state in the start state alone (most keys, most of the
    time) is the one shared ``initial`` value, and an event that no start edge takes leaves it
    as it is, with nothing allocated. Every other event takes Flink's general path."""

    def __init__(self, states: list, start: State, window_ms: int, skip_strategy):
        self.states = {s.name: s for s in states}
        self.start = start
        self.window_ms = window_ms
        self.skip_strategy = skip_strategy
        self.nodes = {s.name: _Node(s) for s in states}
        for node in self.nodes.values():
            for edge, t in zip(node.edges, self.states[node.name].transitions):
                edge.target = self.nodes[t.target.name]
        self.needs_ctx = any(e.with_ctx for n in self.nodes.values() for e in n.edges)
        self.initial = NFAState((ComputationState(start.name),))
        # The start state's edges when they are all TAKE edges on the event alone: an event
        # none of them takes changes nothing (IGNORE edges at the start are dropped anyway,
        # PROCEED edges would need the search).
        edges = self.nodes[start.name].edges
        self.start_takes = edges if all(e.action == TAKE and not e.with_ctx for e in edges) else None
        # the usual start: one TAKE edge with a condition, called here without the edge search
        single = self.start_takes is not None and len(edges) == 1 and edges[0].test is not None
        self.start_test = edges[0].test if single else None
        # ... into a state with no PROCEED edge that is neither final nor a stop: what it takes
        # from the initial state is one partial match, made without the search.
        into = edges[0].target if single else None
        self.start_into = into if into is not None and into.kind not in (FINAL, STOP) and not into.proceeds else None

    def initial_state(self) -> NFAState:
        return self.initial

    def step(self, nfa_state: NFAState, event, timestamp: int):
        """Advance time to ``timestamp`` then process ``event``, as Flink's CepOperator does
        for each event: returns ``(state, matches, timed_out)``."""
        nfa_state, matches, timed_out = self.advance_time(nfa_state, timestamp)
        nfa_state, more = self.process(nfa_state, event, timestamp)
        return nfa_state, matches + more, timed_out

    def start_hit(self, nfa_state: NFAState, event) -> Optional[bool]:
        """Whether the start's one condition takes ``event`` when nothing has started: False means
        ``process`` would leave ``nfa_state`` as it is with no match (its first shortcut); the
        answer goes to ``process`` so the condition runs once per event. None when the start has
        more to it, something has started, or the condition fails (``process`` then names its
        pattern)."""
        if nfa_state is not self.initial or self.start_test is None:
            return None
        try:
            return bool(self.start_test(event))
        except Exception:
            return None

    def process(self, nfa_state: NFAState, event, timestamp: int, start_hit: Optional[bool] = None):
        """Feed one event: ``(state, matches)``, matches as ``{pattern name: [events]}``;
        ``start_hit``: what ``start_hit`` said of this state and event, if it was asked."""
        current = nfa_state.partial_matches
        takes = self.start_takes
        start_edges = None  # the start state's edges for this event, when known without the search
        if takes is not None:
            if self.start_test is not None:
                hit = start_hit
                if hit is None:
                    try:
                        hit = self.start_test(event)
                    except Exception:
                        hit = _holds(takes[0], event, None)  # raises, naming the pattern
                start_edges = takes if hit else ()
            else:
                start_edges = [edge for edge in takes if edge.test is None or _holds(edge, event, None)]
            if not start_edges and (nfa_state is self.initial or (
                    len(current) == 1 and current[0].start_id is None and not nfa_state.completed_matches)):
                return self.initial, []  # nothing started, nothing taken: nothing changes
            if start_edges is takes and nfa_state is self.initial and self.start_into is not None:
                # the one partial match the start takes, before the start state (Flink's order)
                event_id = (timestamp, 0)
                taken = ComputationState(self.start_into.name, ((takes[0].pattern, event_id, event),),
                                         event_id, timestamp)
                return NFAState((taken, current[0]), (), 1), []
        event_id = (timestamp, nfa_state.next_sequence)
        nodes, needs_ctx = self.nodes, self.needs_ctx
        partial, potential = [], []
        for cs in current:
            node = nodes[cs.state]
            is_start = node.kind == START
            ctx = _ConditionContext(cs, timestamp) if needs_ctx else None
            if is_start and start_edges is not None:
                edges = start_edges
            elif node.plain:
                try:
                    edges = [edge for edge in node.edges if edge.test is None or edge.test(event)]
                except Exception:
                    edges = self._outgoing_edges(None, node, event)  # raises, naming the pattern
            else:
                edges = self._outgoing_edges(ctx, node, event)
            reached = []  # (node, computation state)
            for edge in edges:
                target = edge.target
                if edge.action == IGNORE:
                    if not is_start:
                        reached.append((target, cs if target is node else cs._replace(state=target.name)))
                    continue
                taken = ComputationState(target.name, cs.path + ((edge.pattern, event_id, event),),
                                         event_id if is_start else cs.start_id, timestamp)
                reached.append((target, taken))
                if target.proceeds:  # the rest of the pattern may be optional: a match already
                    final = self._final_after_proceed(ctx, target, event)
                    if final is not None:
                        reached.append((final, taken._replace(state=final.name)))
            retained, discard = [], False
            for target, new in reached:
                if target.kind == FINAL:
                    potential.append(new)
                elif target.kind == STOP:
                    discard = True  # a NOT pattern matched: this branch dies
                else:
                    retained.append(new)
            if is_start:
                retained.append(self.initial.partial_matches[0])  # to start the next partial match
            if not discard:
                partial.extend(retained)
        if len(partial) > 1:
            partial.sort(key=_sort_key)
        if len(potential) > 1:
            potential.sort(key=_sort_key)
        if self.skip_strategy.is_skip_strategy():
            matches, partial, completed = self._release(list(nfa_state.completed_matches) + potential, partial)
        else:
            matches, completed = [materialize(m) for m in potential], ()
        return self._state(partial, completed, nfa_state.next_sequence + 1), matches

    def _state(self, partial: list, completed, next_sequence: int) -> NFAState:
        # Nothing started and nothing held back: the initial state (its sequence restarts, as
        # it does when the operator clears an empty state; no live event id is left to order).
        if not completed and len(partial) == 1 and partial[0].start_id is None:
            return self.initial
        return NFAState(tuple(partial), tuple(completed), next_sequence)

    def advance_time(self, nfa_state: NFAState, timestamp: int, with_timed_out: bool = True):
        """Time out partial matches older than ``within``: ``(state, matches, timed_out)``, each
        timed-out partial match as ``(match, timeout timestamp)``; none made without
        ``with_timed_out`` (nothing handles them)."""
        if self.window_ms <= 0:
            return nfa_state, [], []
        limit = timestamp - self.window_ms
        first = _first_start(nfa_state)
        if first is None or first[0] > limit:
            return nfa_state, [], []
        partial, timed_out = [], []
        for cs in nfa_state.partial_matches:
            if cs.start_id is not None and cs.start_id[0] <= limit:
                if with_timed_out:
                    timed_out.append((materialize(cs), cs.start_id[0] + self.window_ms))
            else:
                partial.append(cs)
        matches, completed = [], nfa_state.completed_matches
        if completed:  # a timed-out partial match may have been holding matches back
            matches, partial, completed = self._release(list(completed), partial)
        return self._state(partial, completed, nfa_state.next_sequence), matches, timed_out

    def earliest_timeout(self, nfa_state: NFAState) -> Optional[int]:
        if self.window_ms <= 0:
            return None
        first = _first_start(nfa_state)
        return first[0] + self.window_ms if first is not None else None

    def is_empty(self, nfa_state: NFAState) -> bool:
        """Only the start state left: nothing worth keeping in state."""
        return nfa_state is self.initial or (not nfa_state.completed_matches and _first_start(nfa_state) is None)

    def _release(self, completed: list, partial: list):
        """Emit the held-back matches no earlier partial match can precede, pruning by the skip
        strategy (Flink's processMatchesAccordingToSkipStrategy)."""
        skip = self.skip_strategy
        completed.sort(key=_sort_key)
        matches = []
        while completed and (not partial or _sort_key(completed[0]) <= _sort_key(partial[0])):
            match = completed.pop(0)
            pruning_id = skip.pruning_id(_event_ids(match))
            if pruning_id is not None:
                keep = lambda cs: cs.start_id is None or not skip.should_prune(cs.start_id, pruning_id)  # noqa: E731
                partial = [cs for cs in partial if keep(cs)]
                completed = [cs for cs in completed if keep(cs)]
            matches.append(materialize(match))
        return matches, partial, completed

    @staticmethod
    def _outgoing_edges(ctx, node: _Node, event) -> list:
        """TAKE and IGNORE edges reachable through PROCEED (epsilon) edges whose conditions hold."""
        edges, stack = [], [node]
        while stack:
            for edge in stack.pop().edges:
                if edge.test is None or _holds(edge, event, ctx):
                    if edge.action == PROCEED:
                        stack.append(edge.target)
                    else:
                        edges.append(edge)
        return edges

    @staticmethod
    def _final_after_proceed(ctx, node: _Node, event) -> Optional[_Node]:
        stack = [node]
        while stack:
            for edge in stack.pop().proceeds:
                if edge.test is None or _holds(edge, event, ctx):
                    if edge.target.kind == FINAL:
                        return edge.target
                    stack.append(edge.target)
        return None


def compile_pattern(pattern: Pattern) -> NFA:
    """Flink's ``NFACompiler.compileFactory(pattern, timeoutHandling).createNFA()``."""
    if not isinstance(pattern, Pattern):
        raise TypeError(f"CEP needs a Pattern, got {pattern!r}")
    return _Compiler(pattern).compile()
