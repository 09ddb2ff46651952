"""A consistent taxonomy: an IS-A graph without cyclic and shortcut edges (higher-level-semantics §4.1).

Cyclic edges are removed the naive way of Mougin and Bodenreider (the back edges of a
depth-first search); shortcut edges jump over intermediate levels (``u -> v`` while ``v``
is also reachable from ``u`` through a longer path). Both searches work on the graph's own
adjacency and are near-linear in edges on the shapes a hostile or unlucky file takes:
trees, chains, long cycles, "ladders" (node ``i`` under ``i-1`` and ``i-2``) and dense
layered graphs.

Finding shortcuts is transitive reduction, which no known algorithm does in linear time on
every graph (the worst case is ``O(nodes * edges)``). The search here is pruned by
longest-path levels so that the shapes above stay near-linear; a source a user supplies is
cleaned once, while it is parsed, inside the memory and time budget of
:mod:`bioviz.ontology.budget`, and the removed edges travel with the parsed-source cache.
"""

from __future__ import annotations

import networkx as nx


def cyclic_edges(graph: nx.DiGraph) -> list[tuple[str, str]]:
    """Edges whose removal makes ``graph`` acyclic: the back edges of a depth-first search.

    Only strongly connected components with a cycle are searched (from their smallest node
    id, children in id order, so the result does not depend on insertion order), and the
    cost on a (nearly) acyclic ontology is one linear pass.

    Parameters
    ----------
    graph : networkx.DiGraph
        Parent -> child IS-A graph.

    Returns
    -------
    list of (parent, child)
        Sorted back edges, self-loops included.
    """
    if nx.is_directed_acyclic_graph(graph):  # the common case, one topological sort
        return []
    successors = graph._succ  # networkx's adjacency dicts: a subgraph view per call is several times slower
    removed: set[tuple[str, str]] = {(u, v) for u, v in nx.selfloop_edges(graph)}
    for component in nx.strongly_connected_components(graph):
        if len(component) < 2:
            continue
        state: dict[str, int] = {}  # 1 = on the stack, 2 = finished

        def children(node: str, component=component):
            return iter(sorted(c for c in successors[node] if c in component and c != node))

        for start in sorted(component):
            if start in state:
                continue
            state[start] = 1
            stack = [(start, children(start))]
            while stack:
                node, pending = stack[-1]
                for child in pending:
                    seen = state.get(child)
                    if seen == 1:
                        removed.add((node, child))
                    elif seen is None:
                        state[child] = 1
                        stack.append((child, children(child)))
                        break
                else:
                    state[node] = 2
                    stack.pop()
    return sorted(removed)


def longest_path_levels(graph: nx.DiGraph) -> dict[str, int]:
    """Each node's longest IS-A distance below a node without parents (0 for those).

    ``u`` can only be a proper ancestor of ``w`` if ``level[u] < level[w]``: the filter that
    keeps :func:`shortcut_edges` near-linear.

    Raises
    ------
    networkx.NetworkXUnfeasible
        If ``graph`` has a cycle.
    """
    level: dict[str, int] = {}
    for node in nx.topological_sort(graph):  # Kahn's algorithm: linear
        parents = graph._pred[node]
        level[node] = 1 + max(level[p] for p in parents) if parents else 0
    return level


def shortcut_edges(graph: nx.DiGraph) -> list[tuple[str, str]]:
    """Edges ``u -> v`` where ``v`` is also reachable from ``u`` through a longer path.

    Such an edge jumps over intermediate levels. Only concepts with several parents can
    have one: ``u -> v`` is a shortcut when ``u`` is an ancestor of another parent of ``v``.
    For each such concept, one upward search starts at the parents that could lie below
    another parent and visits only nodes whose longest-path level is at least the lowest
    level among the parents it looks for, stopping once all are found. Parents on one level
    (a dense layered graph) need no search at all, and a ladder's search ends after one
    step. ``graph`` must be acyclic.

    Returns
    -------
    list of (parent, child)
        Sorted shortcut edges.
    """
    level = longest_path_levels(graph)
    predecessors = graph._pred
    shortcuts: list[tuple[str, str]] = []
    for child, parents in predecessors.items():
        if len(parents) < 2:
            continue
        top = max(level[p] for p in parents)
        # A parent on the parents' highest level is below no other parent: not a candidate.
        candidates = {p for p in parents if level[p] < top}
        if not candidates:
            continue
        floor = min(level[p] for p in candidates)
        stack = [p for p in parents if level[p] > floor]  # only these can lie below a candidate
        expanded = set(stack)
        found: set[str] = set()
        while stack and len(found) < len(candidates):
            for ancestor in predecessors[stack.pop()]:
                if level[ancestor] < floor:
                    continue  # too high up to lie below any candidate
                if ancestor in candidates:
                    found.add(ancestor)  # reached from another parent: an ancestor of it
                if ancestor not in expanded:
                    expanded.add(ancestor)
                    stack.append(ancestor)
        shortcuts.extend((parent, child) for parent in found)
    return sorted(shortcuts)


def without_edges(graph: nx.DiGraph, cycles: list, shortcuts: list) -> nx.DiGraph:
    """``graph`` without the given edges: a copy when there are any, else ``graph`` itself."""
    if not cycles and not shortcuts:
        return graph  # a clean tree (ICD) is used as it is, read-only
    cleaned = graph.copy()
    cleaned.remove_edges_from(cycles)
    cleaned.remove_edges_from(shortcuts)
    return cleaned


def consistent_taxonomy(graph: nx.DiGraph) -> tuple[nx.DiGraph, list, list]:
    """``graph`` without cyclic and shortcut edges (a copy only when some are removed).

    Returns
    -------
    (graph, cyclic, shortcuts)
        The cleaned graph and the removed edges of each kind.
    """
    cycles = cyclic_edges(graph)
    acyclic = graph
    if cycles:
        acyclic = graph.copy()
        acyclic.remove_edges_from(cycles)
    shortcuts = shortcut_edges(acyclic)
    if shortcuts:
        acyclic = acyclic.copy() if acyclic is graph else acyclic
        acyclic.remove_edges_from(shortcuts)
    return acyclic, cycles, shortcuts
