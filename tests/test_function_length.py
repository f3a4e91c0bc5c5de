"""No function in the package is longer than `MAX_LINES` without a reason.

A function's length is counted from its `def` line to its last line, the
docstring included. One that needs more says why in a comment in its own
body (not a nested function's) that starts with `# Long:` and gives the
reason, e.g. "# Long: its docstring documents thirteen arguments; the body
is the steps: ...".
"""

import ast
import io
import pathlib
import textwrap
import tokenize

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "keras_vit"
MAX_LINES = 80
MARKER = "# Long:"


def _comments(source):
    """Line number -> the comment on that line."""
    return {
        token.start[0]: token.string
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    }


def _functions(tree):
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def _has_reason(node, comments):
    """Whether `node`'s own lines hold a `# Long:` comment with a reason."""
    nested = [
        (inner.lineno, inner.end_lineno)
        for inner in _functions(node)
        if inner is not node
    ]
    for line in range(node.lineno, node.end_lineno + 1):
        comment = comments.get(line, "")
        if (
            comment.startswith(MARKER)
            and comment[len(MARKER) :].strip()
            and not any(start <= line <= end for start, end in nested)
        ):
            return True
    return False


def long_functions(source, name="<source>"):
    """`name:line function (N lines)` for each function of `source` over
    `MAX_LINES` whose body gives no `# Long:` reason."""
    comments = _comments(source)
    found = []
    for node in _functions(ast.parse(source)):
        length = node.end_lineno - node.lineno + 1
        if length > MAX_LINES and not _has_reason(node, comments):
            found.append(f"{name}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_is_long_without_a_reason():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE.parent).as_posix()
        found += long_functions(path.read_text(), name)
    assert found == [], (
        f"functions over {MAX_LINES} lines: split them into named steps, "
        f"or give the reason in a comment starting with {MARKER!r}"
    )


def _function(num_lines, comment=None, nested_comment=None):
    """The source of a function of `num_lines` lines."""
    lines = ["def f():", '    """A function."""']
    if comment is not None:
        lines.append(f"    {comment}")
    if nested_comment is not None:
        lines += ["    def g():", f"        {nested_comment}", "        pass"]
    lines += ["    x = 0"] * (num_lines - len(lines) - 1) + ["    return x"]
    return "\n".join(lines) + "\n"


def test_the_check_counts_from_def_to_the_last_line():
    assert long_functions(_function(MAX_LINES)) == []
    assert long_functions(_function(MAX_LINES + 1)) == [
        f"<source>:1 f ({MAX_LINES + 1} lines)"
    ]


def test_only_a_long_comment_with_a_reason_in_the_function_itself_counts():
    long = MAX_LINES + 1
    assert long_functions(_function(long, "# Long: the docstring")) == []
    for source in (
        _function(long, "# Long:"),  # no reason
        _function(long, "# long: lower case"),
        _function(long, "# Over 80 lines for its docstring"),
        _function(long, nested_comment="# Long: a nested function's"),
    ):
        assert long_functions(source) != [], source
    # A nested function over the limit needs its own reason.
    inner = textwrap.indent(_function(long).replace("def f", "def g"), "    ")
    outer = "def f():\n    # Long: holds g\n" + inner
    assert long_functions(outer) == [f"<source>:3 g ({long} lines)"]
