"""Lists what `make test-fast` never runs: `make coverage-fast` runs the
fast set under coverage.py and then this on its JSON report.

    python tests/fast_coverage.py REPORT.json

Prints the package's modules that no fast test imported, then each
module's functions whose bodies never ran. Code run in a subprocess (a
`keras-vit` command, a JAX-backend script) is not measured, so a function
only those reach is listed too: a lead to a fast test, not a verdict.
"""

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "keras_vit"


def never_run(report):
    """`(modules, functions)` that the coverage JSON `report` shows never
    ran: each module's path with no line run, and `path: function` for
    each function with lines of its own, none of them run."""
    files = {
        pathlib.Path(path).resolve(): data
        for path, data in report["files"].items()
    }
    modules, functions = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        data = files.get(path)
        if data is None or (
            data["summary"]["num_statements"] and not data["executed_lines"]
        ):
            modules.append(name)
            continue
        for function, part in data.get("functions", {}).items():
            lines = part["executed_lines"] + part["missing_lines"]
            if function and lines and not part["executed_lines"]:
                functions.append(f"{name}: {function}")
    return modules, functions


def main(argv):
    if len(argv) != 1:
        sys.exit(f"usage: python {__file__} REPORT.json")
    with open(argv[0], encoding="utf-8") as file:
        modules, functions = never_run(json.load(file))
    print(f"{len(modules)} modules never imported by the fast set:")
    print("".join(f"  {m}\n" for m in modules), end="")
    print(f"{len(functions)} functions never run by the fast set:")
    print("".join(f"  {f}\n" for f in functions), end="")


if __name__ == "__main__":
    main(sys.argv[1:])
