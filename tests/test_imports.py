"""Imports point one way, as each package's README states, and sit at module top.

Walks the AST of every module of the five source folders (``zyfa/``, ``kernels/``, ``trace/``,
``analyzer/``, ``webui/``) and fails on:

- an import of a zyfa module that the importer's README rule does not allow (an *upward* import).
  Rules are lines ``- `zyfa.PKG` may import: `zyfa.X`, `zyfa.Y` `` (or ``nothing of zyfa``) in
  the README.md files of those folders; a module follows the most specific rule whose package
  contains it and may always import inside that package. Every module must be covered by a rule;
- a cycle among modules (function-local imports included: a lazy import does not make a cycle
  go away);
- a function-local import without a ``# lazy: <reason>`` comment on its line or in the block of
  import/comment lines right above it (imports belong at module top; the exceptions are optional
  dependencies and measured start-up costs, and they say so).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"zyfa": "zyfa", "kernels": "zyfa.kernels", "trace": "zyfa.trace", "analyzer": "zyfa.analyzer",
           "webui": "zyfa.webui"}
RULE = re.compile(r"^- `(zyfa(?:\.\w+)*)` may import: (.*)$")
LAZY = re.compile(r"#\s*lazy:\s*\S")


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported zyfa module
    line: int
    top: bool  # at module top (also inside a module-level if/try)
    commented: bool  # a "# lazy: reason" comment on its line or the line above


def _modules() -> dict[str, Path]:
    out = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The zyfa module an imported dotted name refers to (a module, or the module defining it)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in MODULES:
            return ".".join(parts[:i])
    return None


def _commented(lines: list[str], index: int) -> bool:
    """A "# lazy: reason" on the import's line or on a comment/import line of the block right above."""
    if LAZY.search(lines[index]):
        return True
    i = index - 1
    while i >= 0 and lines[i].strip().startswith(("#", "import ", "from ")):
        if LAZY.search(lines[i]):
            return True
        i -= 1
    return False


def _imports(module: str, path: Path) -> list[Import]:
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text)
    top = set()
    for node in tree.body:
        if isinstance(node, (ast.If, ast.Try)):
            top.update(id(n) for n in ast.walk(node))
        top.add(id(node))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            names = [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        commented = _commented(lines, node.lineno - 1)
        for name in names:
            target = _resolve(name)
            if target is not None and target != module:
                out.append(Import(module, target, node.lineno, id(node) in top, commented))
            elif target is None and id(node) not in top:  # a third-party or stdlib import
                out.append(Import(module, name, node.lineno, False, commented))
    return out


IMPORTS = [imp for module, path in MODULES.items() for imp in _imports(module, path)]


def _rules() -> dict[str, tuple[str, ...]]:
    rules: dict[str, tuple[str, ...]] = {}
    for folder in FOLDERS:
        for readme in sorted((ROOT / folder).rglob("README.md")):
            for line in readme.read_text().splitlines():
                m = RULE.match(line.strip())
                if m:
                    assert m.group(1) not in rules, f"{readme}: a second rule for {m.group(1)}"
                    rules[m.group(1)] = tuple(re.findall(r"`(zyfa(?:\.\w+)*)`", m.group(2)))
    return rules


RULES = _rules()


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _rule_of(module: str):
    matches = [p for p in RULES if _within(module, p)]
    return max(matches, key=len) if matches else None


def test_readmes_state_rules_for_every_module():
    assert len(RULES) >= 10, RULES
    uncovered = sorted(m for m in MODULES if m != "zyfa" and _rule_of(m) is None)
    assert not uncovered, f"modules no README rule covers (add '- `zyfa.X` may import: ...'): {uncovered}"
    unknown = sorted({a for allowed in RULES.values() for a in allowed if _resolve(a) is None
                      and not any(_within(m, a) for m in MODULES)})
    assert not unknown, f"README rules name packages that do not exist: {unknown}"


def test_no_upward_imports():
    bad = []
    for imp in IMPORTS:
        if imp.target not in MODULES:
            continue
        if imp.source == "zyfa":  # the namespace root: loads its public names on first use, imports none
            bad.append(f"zyfa/__init__.py:{imp.line}: imports {imp.target}")
            continue
        rule = _rule_of(imp.source)
        if rule is None:
            continue  # reported by test_readmes_state_rules_for_every_module
        if _within(imp.target, rule) or any(_within(imp.target, a) for a in RULES[rule]):
            continue
        bad.append(f"{MODULES[imp.source].relative_to(ROOT)}:{imp.line}: {imp.source} imports {imp.target}, "
                   f"which the rule for {rule} does not allow {list(RULES[rule])}")
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in IMPORTS:
        if imp.target in MODULES:
            graph[imp.source].add(imp.target)
    # Tarjan's strongly connected components
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, "import cycles (function-local imports included):\n" + "\n".join(map(str, cycles))


def test_function_local_imports_say_why():
    bad = [f"{MODULES[imp.source].relative_to(ROOT)}:{imp.line}: {imp.target}"
           for imp in IMPORTS if not imp.top and not imp.commented]
    assert not bad, ("imports belong at module top; a function-local one needs a '# lazy: <reason>' comment "
                     "(optional dependency, measured start-up cost):\n" + "\n".join(sorted(set(bad))))


def test_the_check_is_not_vacuous():
    """The walk sees real imports, and the rules would reject a library -> CLI import."""
    assert any(i.source == "zyfa.trace.cdna4.tracer" and i.target == "zyfa.trace.cdna4.estimate" and i.top
               for i in IMPORTS)
    rule = _rule_of("zyfa.trace.proton")
    assert not any(_within("zyfa.cli.bench_main", a) for a in RULES[rule] + (rule,))
