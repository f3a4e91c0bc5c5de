"""The package's layers: every import, at the top of a module or inside a
function, goes down (leaves -> layers -> the model's config and checks
-> weights -> model -> builders -> training / export / inspection /
evaluation -> CLI), and no modules import
each other in a circle.

Read from the source (every `import` statement), not by importing: any
module imported alone runs `keras_vit/__init__.py` first, which imports the
whole package in one fixed order, so a fresh interpreter per module would
only ever test that order.
"""

import ast
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "keras_vit"

#: The rank whose parts may import each other (without a circle).
PEERS = 9

#: The package's parts, bottom (0) to top. A part imports only parts of a
#: lower rank, or, at rank `PEERS`, its peers (without a circle).
RANKS = {
    # Leaves: values, checks, data tables, timing, files.
    "keras_vit.version": 0,
    "keras_vit.extras": 0,
    "keras_vit.options": 0,
    "keras_vit.arg_checks": 0,
    "keras_vit.timing": 0,
    "keras_vit.files": 0,
    "keras_vit.model_argument": 0,
    "keras_vit.registry": 0,
    # Pure ops and input pipelines.
    "keras_vit.patch_grid": 1,
    "keras_vit.data": 1,
    "keras_vit.layers": 2,
    # What the weights readers need of the model: its checked config, the
    # checks of a model handed in, the Keras workarounds.
    "keras_vit.models.config": 3,
    "keras_vit.models.preprocessing": 3,
    "keras_vit.models.keras_fixes": 3,
    "keras_vit.models.model_checks": 4,
    # The readers and loading, below the model class that imports them
    # (`ViT.from_preset`, `ViT.load_weights`).
    "keras_vit.weights": 5,
    "keras_vit.models": 6,
    # What builds models: a checkpoint's own model, the builders.
    "keras_vit.weights.convert": 7,
    "keras_vit.builders": 8,
    # The one resolver of names, presets, files and folders to a model.
    "keras_vit.resolver": 8.5,
    "keras_vit.training": PEERS,
    "keras_vit.export": PEERS,
    "keras_vit.visualize": PEERS,
    "keras_vit.evaluation": PEERS,
    "keras_vit.benchmark": PEERS,
    "keras_vit.cli": 10,
    # The console script (installed as the top-level `keras_vit_cli`),
    # which imports the command line with importlib.
    "keras_vit._launcher": 11,
}


def _modules():
    found = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if name.endswith(".__init__"):
            name = name[: -len(".__init__")]
        found[name] = path
    return found


MODULES = _modules()


def _imports(name, path):
    """The package's modules that `name` imports anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[
                    : len(package.split(".")) - node.level + 1
                ]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                # `from pkg import module` reaches the module; `from pkg
                # import name` the package's face that hands the name on.
                module = f"{base}.{alias.name}"
                found.add(module if module in MODULES else base)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _part(module):
    for part in sorted(RANKS, key=len, reverse=True):
        if module == part or module.startswith(part + "."):
            return part
    return None


def test_every_module_has_a_place_in_the_layers():
    unplaced = [m for m in MODULES if m != "keras_vit" and _part(m) is None]
    assert unplaced == [], "add them to RANKS"


def test_imports_go_down_the_layers():
    upward = []
    for module, imported in GRAPH.items():
        if module == "keras_vit":
            continue  # the package's face imports everything
        for other in imported:
            if other == "keras_vit":
                upward.append(
                    f"{module} -> keras_vit (the package's face, on top)"
                )
                continue
            mine, theirs = _part(module), _part(other)
            if mine == theirs:
                continue
            if RANKS[theirs] > RANKS[mine] or (
                RANKS[theirs] == RANKS[mine] and RANKS[mine] != PEERS
            ):
                upward.append(f"{module} -> {other}")
    assert sorted(upward) == []


def _circles(graph):
    """Every circle a depth-first walk of `graph` meets, as module paths."""
    state, circles = {}, []

    def visit(node, path):
        state[node] = "open"
        for other in sorted(graph.get(node, ())):
            if state.get(other) == "open":
                circles.append(path[path.index(other) :] + [other])
            elif other not in state:
                visit(other, path + [other])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return circles


def _package_graph():
    return {m: set(out) for m, out in GRAPH.items() if m != "keras_vit"}


def test_no_modules_import_each_other_in_a_circle():
    assert _circles(_package_graph()) == []


def test_the_circle_check_finds_the_circle_that_was_there():
    """The check itself: the argument checks importing the model again (the
    circle issue 23 removed) is found by the same walk the test above uses."""
    graph = _package_graph()
    graph["keras_vit.arg_checks"] = {"keras_vit.models.vit"}
    found = _circles(graph)
    assert any(
        "keras_vit.arg_checks" in c and "keras_vit.models.vit" in c
        for c in found
    ), found


def test_the_source_tree_is_what_was_read():
    assert os.path.isfile(PACKAGE / "__init__.py")
    assert len(MODULES) > 50 and "keras_vit.models.vit" in GRAPH


#: Where an import inside a function is the rule: the command line keeps
#: `--help` and the listing commands free of Keras and TensorFlow.
COMMAND_LINE = ("keras_vit.cli", "keras_vit._launcher")


def _deferred_imports():
    """`module:line` of each import of a keras_vit module inside a
    function outside `COMMAND_LINE`, and whether the comment right above
    it gives the reason (`# Deferred: ...`)."""
    found = {}
    for name, path in MODULES.items():
        if name.startswith(COMMAND_LINE):
            continue
        lines = path.read_text().splitlines()
        for function in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(
                function, (ast.FunctionDef, ast.AsyncFunctionDef)
            ):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Import):
                    module = node.names[0].name
                elif isinstance(node, ast.ImportFrom):
                    module = node.module or ""
                else:
                    continue
                if module.split(".")[0] == "keras_vit":
                    above = "\n".join(lines[: node.lineno - 1]).rsplit("\n")
                    comments = [
                        line.strip()
                        for line in above[-3:]
                        if line.strip().startswith("#")
                    ]
                    found[f"{name}:{node.lineno}"] = any(
                        c.startswith("# Deferred:") for c in comments
                    )
    return found


def test_imports_inside_functions_say_why():
    # An import is at the top of its module, where a reader looks and the
    # layering above sees it; inside a function only where a measured cost
    # says so, in a "# Deferred:" comment right above it.
    found = _deferred_imports()
    assert [where for where, said in found.items() if not said] == []
    assert len(found) <= 2, sorted(found)
