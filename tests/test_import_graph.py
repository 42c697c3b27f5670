"""No import cycle anywhere in the project, over the real import graph.

The graph is grimp's (the one import-linter checks its contracts on), built over every root
package named in pyproject's ``[tool.importlinter]``, so a new package joins the check as soon
as it joins the contracts. Every import counts: module level, inside functions and under
``TYPE_CHECKING``, and a module importing its own parent package (whose ``__init__`` imports
it back) is a cycle like any other.
"""

from __future__ import annotations

import tomllib
from collections import deque
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent


def root_packages() -> list[str]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return list(tomllib.load(file)["tool"]["importlinter"]["root_packages"])


def import_graph() -> dict[str, set[str]]:
    graph = grimp.build_graph(*root_packages(), cache_dir=None)
    return {
        module: graph.find_modules_directly_imported_by(module) - {module}
        for module in graph.modules
    }


def strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (the graph is deep enough to trouble recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    components.append(component)
    return components


def cycle_path(edges: dict[str, set[str]], component: set[str]) -> list[str]:
    """The shortest way round from the component's first module back to itself."""
    start = min(component)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for successor in sorted(edges[node] & component):
            if successor == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if successor not in came_from:
                came_from[successor] = node
                queue.append(successor)
    return sorted(component)


def test_the_graph_covers_every_root_package():
    modules = import_graph()
    for package in root_packages():
        assert package in modules, f"{package} is not in the import graph"


def test_no_import_cycle():
    edges = import_graph()
    cycles = [
        " -> ".join(cycle_path(edges, component))
        for component in strongly_connected(edges)
        if len(component) > 1
    ]
    assert not cycles, "import cycles:\n" + "\n".join(sorted(cycles))


def test_the_cycle_finder_finds_a_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    components = [c for c in strongly_connected(edges) if len(c) > 1]
    assert components == [{"a", "b", "c"}]
    assert cycle_path(edges, components[0]) == ["a", "b", "c", "a"]
