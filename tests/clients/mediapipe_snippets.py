"""Checks a Kotlin or Swift snippet's calls into MediaPipe Tasks against the
classes of mediapipe_api.json (make_mediapipe_api.py): each `receiver.
member` must be a public member of the receiver's class (or a class it
extends), each call must match one of the member's overloads (Kotlin: the
argument count and the types known here; Swift: the argument labels in
order and the known types), and a constructor call one of the class's
constructors. The snippet is read as far as its types can be followed:
`val`/`let` bindings, function parameters, return types, list elements
(`[0]`, `map { it }` / `map { $0 }`); calls on other types (Android,
Foundation) are not checked.
"""

import json
import pathlib
import re

API = json.loads(
    pathlib.Path(__file__)
    .with_name("mediapipe_api.json")
    .read_text(encoding="utf-8")
)
_TOKEN = re.compile(
    r'"(?:\\.|[^"\\])*"|\$?\w+|\?\.|\?\?|!!|==|!=|->|\n|[^\s\w]'
)
#: The standard library's and the platform's names a snippet may use
#: without an import (Kotlin: besides the imported classes).
OTHERS = {"kotlin": {"Pair"}, "swift": {"Bundle"}}
#: Java and Objective-C types as the snippets' languages name them.
_SAME = {
    "float": "Float",
    "int": "Int",
    "Integer": "Int",
    "long": "Long",
    "boolean": "Boolean",
    "double": "Double",
}


def _tokens(source):
    source = re.sub(r"//[^\n]*", "", source)
    source = re.sub(r"^import [^\n]*$", "", source, flags=re.M)
    return _TOKEN.findall(source)


def _list_element(kind):
    match = re.fullmatch(r"List<(.*)>|\[(.*)\]", kind or "")
    return (match[1] or match[2]) if match else None


class _Checker:
    def __init__(self, language, source):
        self.swift = language == "swift"
        self.classes = API[language]["classes"]
        self.tokens = _tokens(source)
        imports = re.findall(r"^import ([\w.]+)$", source, flags=re.M)
        if self.swift:  # a module import makes all its classes visible
            self.visible = set(self.classes) | OTHERS[language]
        else:
            self.visible = {name.rsplit(".", 1)[-1] for name in imports}
            self.visible |= OTHERS[language]
        self.at = 0
        self.scopes = [{}]
        self.problems = []

    # tokens
    def peek(self, skip_lines=True):
        at = self.at
        while skip_lines and at < len(self.tokens) and self.tokens[at] == "\n":
            at += 1
        return self.tokens[at] if at < len(self.tokens) else None

    def second(self):
        """The token after the next one, lines skipped."""
        rest = [t for t in self.tokens[self.at :] if t != "\n"]
        return rest[1] if len(rest) > 1 else None

    def take(self, expected=None):
        while self.tokens[self.at] == "\n":
            self.at += 1
        token = self.tokens[self.at]
        if expected is not None and token != expected:
            raise SyntaxError(f"expected {expected!r}, got {token!r}")
        self.at += 1
        return token

    def continues(self):
        """Whether the expression goes on (a `.` on the next line)."""
        return self.peek() in (".", "?.") or self.peek(False) not in (
            "\n",
            None,
        )

    # types
    def lookup(self, name):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def member(self, kind, name):
        while kind in self.classes:
            entry = self.classes[kind]
            found = entry["methods"].get(name)
            if found is None and self.swift:
                found = entry["properties"].get(name)
            if found is not None:
                return found
            kind = entry["extends"]
        return None

    def fits(self, given, wanted):
        """Whether a `given` argument may be passed as `wanted`: a class or
        one it extends; types this module cannot tell apart pass."""
        given = _SAME.get(given, given)
        wanted = _SAME.get(wanted, wanted)
        if given is None or wanted is None:
            return True
        if given in self.classes:
            while given is not None and given != wanted:
                given = self.classes.get(given, {}).get("extends")
            return given == wanted
        known = {"String", "Float", "Int", "RectF", "CGRect", "UIImage"}
        known |= set(self.classes)
        return given == wanted or not {given, wanted} <= known

    def overload(self, where, overloads, labels, kinds):
        """The return type of the overload the call matches, or a problem."""
        for found in overloads:
            params = found["params"]
            if len(params) != len(kinds):
                continue
            if self.swift and found["labels"] != [
                "_" if label is None else label for label in labels
            ]:
                continue
            if all(self.fits(k, p) for k, p in zip(kinds, params)):
                return found.get("returns")
        shown = ", ".join(
            f"{label}: {kind}" if label else str(kind)
            for label, kind in zip(labels, kinds)
        )
        self.problems.append(f"{where}({shown}) matches no overload")
        return None

    # expressions
    def arguments(self):
        labels, kinds = [], []
        self.take("(")
        while self.peek() != ")":
            label = None
            if self.swift and self.second() == ":":
                label = self.take()
                self.take(":")
            labels.append(label)
            kinds.append(self.expression())
            if self.peek() == ",":
                self.take(",")
        self.take(")")
        return labels, kinds

    def closure(self, element):
        self.take("{")
        self.scopes.append({"$0" if self.swift else "it": element})
        while self.peek() != "}":
            self.statement()
        self.scopes.pop()
        self.take("}")

    def primary(self):
        token = self.take()
        if token in ("try", "!"):
            return self.primary()
        if token == "(":
            kinds = [self.expression()]
            while self.peek() == ",":
                self.take(",")
                kinds.append(self.expression())
            self.take(")")
            return kinds[0] if len(kinds) == 1 else None
        if token.startswith('"') or token[0].isdigit():
            return "String" if token.startswith('"') else "Int"
        if token in ("null", "nil"):
            return None
        if any(token in scope for scope in self.scopes):
            kind = self.lookup(token)
        elif token in self.classes and token in self.visible:
            if self.peek(False) == "(":
                return self.construct(token)
            return ("class", token)
        elif token in self.visible:
            kind = token  # a platform class
        else:
            self.problems.append(f"{token} is not declared or imported")
            kind = None
        if self.peek(False) == "(":
            self.arguments()
            return kind if token in self.visible else None
        return kind

    def construct(self, name):
        labels, kinds = self.arguments()
        entry = self.classes[name]
        key = "initializers" if self.swift else "constructors"
        overloads = entry[key]
        if not self.swift:
            overloads = [{"params": p} for p in overloads]
        self.overload(name, overloads, labels, kinds)
        return name

    def postfix(self, kind):
        while self.continues():
            token = self.peek()
            if token in (".", "?."):
                self.take()
                kind = self.select(kind, self.take())
            elif token == "[" and self.peek(False) == "[":
                self.take("[")
                self.expression()
                self.take("]")
                kind = _list_element(kind)
            elif token in ("!!", "!"):
                self.take()
            else:
                return kind
        return kind

    def select(self, kind, name):
        """The type of `kind.name`, the call's arguments read if any."""
        if isinstance(kind, tuple):
            if f"{kind[1]}.{name}" in self.classes:
                return ("class", f"{kind[1]}.{name}")
            return self.call(kind[1], name, static=True)
        if name == "map" and _list_element(kind):
            self.closure(_list_element(kind))
            return None
        if kind not in self.classes:
            if self.peek(False) == "(":
                self.arguments()
            if self.peek(False) == "{":
                self.closure(None)
            return None
        return self.call(kind, name, static=False)

    def call(self, kind, name, static):
        found = self.member(kind, name)
        if found is None:
            self.problems.append(f"{kind} has no public member {name}")
            if self.peek(False) == "(":
                self.arguments()
            return None
        if isinstance(found, str):  # a Swift property
            return found.rstrip("?")
        if self.peek(False) != "(":
            self.problems.append(f"{kind}.{name} is a method, not called")
            return None
        overloads = [f for f in found if f.get("static", False) == static]
        labels, kinds = self.arguments()
        return self.overload(f"{kind}.{name}", overloads, labels, kinds)

    def expression(self):
        if self.peek() == "if":
            self.take("if")
            self.take("(")
            self.expression()
            self.take(")")
            kind = self.expression()
            self.take("else")
            other = self.expression()
            return kind or other
        kind = self.postfix(self.primary())
        while self.peek(False) in ("==", "!=", "??", "?:"):
            self.take()
            other = self.postfix(self.primary())
            kind = kind or other
        return kind

    # statements
    def type_name(self):
        """A declared type, up to `=`, `,`, `)` or `{` outside brackets."""
        words, depth = [], 0
        while depth or self.peek(False) not in ("=", ",", ")", "{", "\n"):
            token = self.take()
            depth += {"<": 1, "[": 1, "(": 1, ">": -1, "]": -1}.get(token, 0)
            depth -= token == ")"
            words.append(token)
        name = "".join(words).rstrip("?")
        return _SAME.get(name, name)

    def statement(self):
        token = self.peek()
        if token in ("val", "let", "var"):
            self.take()
            name, kind = self.take(), None
            if self.peek(False) == ":":
                self.take(":")
                kind = self.type_name()
            if self.peek(False) == "=":
                self.take("=")
                kind = self.expression() or kind
            self.scopes[-1][name] = kind
        elif token == "fun" or token == "func":
            self.function()
        elif token == "if" and self.second() == "let":
            self.take("if")
            self.take("let")
            name = self.take()
            self.take("=")
            self.scopes.append({name: self.expression()})
            self.block()
            self.scopes.pop()
            if self.peek() == "else":
                self.take("else")
                self.block()
        elif token == "return":
            self.take()
            self.expression()
        else:
            self.expression()
            if self.peek(False) == "=":
                self.take("=")
                self.expression()

    def block(self):
        self.take("{")
        while self.peek() != "}":
            self.statement()
        self.take("}")

    def function(self):
        self.take()
        self.take()  # the name
        self.take("(")
        scope = {}
        while self.peek() != ")":
            name = self.take()
            if self.swift and self.peek() != ":":
                name = self.take()  # `_ photo`: the label, then the name
            self.take(":")
            scope[name] = self.type_name()
            if self.peek() == ",":
                self.take(",")
        self.take(")")
        while self.peek() != "{":
            self.take()
        self.scopes.append(scope)
        self.block()
        self.scopes.pop()


def problems(language, source):
    """What the snippet calls that MediaPipe does not declare, as
    sentences; `[]` when every checked call matches."""
    checker = _Checker(language, source)
    while checker.peek() is not None:
        checker.statement()
    return checker.problems
