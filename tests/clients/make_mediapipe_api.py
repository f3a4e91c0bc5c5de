"""Writes tests/clients/mediapipe_api.json: the public API of MediaPipe
Tasks' Android (Java, called from Kotlin) and iOS (Objective-C, called
from Swift) image classifier and embedder, class by class, read from a git
clone of google-ai-edge/mediapipe at one commit.
tests/test_docs_mobile.py checks the mobile guide's MediaPipe snippets
against it.

    python tests/clients/make_mediapipe_api.py /path/to/mediapipe/.git

Android: each class (by its name inside its file, nested ones as
`Outer.Inner`; `imports` has the full names) with its superclass, its
public constructors' and methods' parameter types and its methods' return
types, type names resolved to the recorded classes. iOS: each
`NS_SWIFT_NAME`d class by its Swift name with its superclass, its
`@property` names and types, its initialisers' Swift argument labels
(`initWithUIImage:error:` is `init(uiImage:)`: the `error:` argument
becomes `throws`; `init()` unless the header makes `init` unavailable or
names designated initialisers) and its `NS_SWIFT_NAME`d methods with their
labels; Objective-C types are written as Swift imports them.
"""

import json
import pathlib
import re
import subprocess
import sys

JAVA = "mediapipe/tasks/java/com/google/mediapipe/"
JAVA_FILES = [
    "mediapipe/java/com/google/mediapipe/framework/image/BitmapImageBuilder.java",
    "mediapipe/java/com/google/mediapipe/framework/image/MPImage.java",
    JAVA + "tasks/core/BaseOptions.java",
    JAVA + "tasks/vision/core/BaseVisionTaskApi.java",
    JAVA + "tasks/vision/core/ImageProcessingOptions.java",
    JAVA + "tasks/vision/imageclassifier/ImageClassifier.java",
    JAVA + "tasks/vision/imageclassifier/ImageClassifierResult.java",
    JAVA + "tasks/vision/imageembedder/ImageEmbedder.java",
    JAVA + "tasks/vision/imageembedder/ImageEmbedderResult.java",
    JAVA + "tasks/components/containers/Category.java",
    JAVA + "tasks/components/containers/Classifications.java",
    JAVA + "tasks/components/containers/ClassificationResult.java",
    JAVA + "tasks/components/containers/Embedding.java",
    JAVA + "tasks/components/containers/EmbeddingResult.java",
]
IOS = "mediapipe/tasks/ios/"
IOS_FILES = [
    IOS + "core/sources/MPPBaseOptions.h",
    IOS + "core/sources/MPPTaskOptions.h",
    IOS + "vision/core/sources/MPPImage.h",
    IOS + "vision/image_classifier/sources/MPPImageClassifier.h",
    IOS + "vision/image_classifier/sources/MPPImageClassifierOptions.h",
    IOS + "vision/image_classifier/sources/MPPImageClassifierResult.h",
    IOS + "vision/image_embedder/sources/MPPImageEmbedder.h",
    IOS + "vision/image_embedder/sources/MPPImageEmbedderOptions.h",
    IOS + "vision/image_embedder/sources/MPPImageEmbedderResult.h",
    IOS + "components/containers/sources/MPPCategory.h",
    IOS + "components/containers/sources/MPPClassificationResult.h",
    IOS + "components/containers/sources/MPPEmbedding.h",
    IOS + "components/containers/sources/MPPEmbeddingResult.h",
]
#: The CocoaPods pod of the iOS classes, which names their Swift module.
PODSPEC = IOS + "MediaPipeTasksVision.podspec.template"
OUT = pathlib.Path(__file__).with_name("mediapipe_api.json")


def _show(git_dir, path):
    return subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"HEAD:{path}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _without_comments(source):
    source = re.sub(r'"(\\.|[^"\\])*"', '""', source)
    return re.sub(r"/\*.*?\*/|//[^\n]*", "", source, flags=re.S)


def _split_top(text):
    """`text` split at the commas outside `<...>`."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"<": 1, ">": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [p.strip() for p in parts + [text[start:]] if p.strip()]


def _java_classes(source):
    """`{position of body's "{": (nested name, superclass)}` and the
    class path enclosing each brace depth's direct members."""
    found, stack, depth, pending = {}, [], 0, None
    members = []  # (start, end, nested name) of each class's body
    pattern = r"\bclass\s+(\w+)(?:<[^{]*?>)?(?:\s+extends\s+([\w.]+))?|[{}]"
    for token in re.finditer(pattern, source):
        if token.group(1):
            pending = token.group(1), token.group(2)
        elif token.group(0) == "{":
            if pending:
                stack.append((pending[0], depth, token.end()))
                name = ".".join(n for n, _, _ in stack)
                found[name] = pending[1]
                pending = None
            depth += 1
        else:
            depth -= 1
            if stack and stack[-1][1] == depth:
                name = ".".join(n for n, _, _ in stack)
                members.append((stack[-1][2], token.start(), name, depth + 1))
                stack.pop()
    return found, members


def _depth_at(source, position):
    return source.count("{", 0, position) - source.count("}", 0, position)


_MEMBER = re.compile(
    r"\bpublic\s+((?:(?:static|final|abstract|synchronized)\s+)*)"
    r"(?:<[^>]*>\s*)?(?:([\w.]+(?:<[^()]*?>)?(?:\[\])?)\s+)?(\w+)\s*"
    r"\(([^)]*)\)"
)


def _java_members(source, start, end, depth):
    """`(constructors, methods)` declared public directly in a class body."""
    constructors, methods = [], []
    for match in _MEMBER.finditer(source, start, end):
        if _depth_at(source, match.start()) != depth:
            continue
        params = [
            re.sub(r"@\w+\s+|\bfinal\s+", "", p).rsplit(None, 1)[0]
            for p in _split_top(match.group(4))
        ]
        if match.group(2) is None:
            constructors.append(params)
        else:
            static = "static" in match.group(1).split()
            methods.append((match.group(3), static, params, match.group(2)))
    return constructors, methods


def _resolve(name, scope, known):
    """A Java type name as the recorded class it names (`Builder` inside
    `ImageClassifier.ImageClassifierOptions` is that class's Builder),
    generic arguments resolved too; other names as written."""
    generic = re.fullmatch(r"([\w.]+)<(.*)>", name)
    if generic:
        args = [_resolve(a, scope, known) for a in _split_top(generic[2])]
        return f"{_resolve(generic[1], scope, known)}<{', '.join(args)}>"
    parts = scope.split(".")
    for n in range(len(parts), -1, -1):
        candidate = ".".join(parts[:n] + [name])
        if candidate in known:
            return candidate
    return name


def java_api(source):
    """`(package, classes)`: each class's superclass and public
    constructors and methods, its types resolved within the file."""
    source = _without_comments(source)
    package = re.search(r"^package ([\w.]+);", source, re.M).group(1)
    supers, bodies = _java_classes(source)
    classes = {}
    for start, end, name, depth in bodies:
        constructors, methods = _java_members(source, start, end, depth)
        entry = {"extends": supers[name], "constructors": constructors}
        entry["methods"] = {}
        for method, static, params, returns in methods:
            entry["methods"].setdefault(method, []).append(
                {"static": static, "params": params, "returns": returns}
            )
        classes[name] = entry
    return package, classes


def _resolve_java(classes):
    """Every type name in `classes` resolved against all the classes."""
    known = set(classes)
    for name, entry in classes.items():
        if entry["extends"]:
            entry["extends"] = _resolve(entry["extends"], name, known)
        entry["constructors"] = [
            [_resolve(p, name, known) for p in params]
            for params in entry["constructors"]
        ]
        for overloads in entry["methods"].values():
            for method in overloads:
                method["params"] = [
                    _resolve(p, name, known) for p in method["params"]
                ]
                method["returns"] = _resolve(method["returns"], name, known)


def _swift_label(part):
    """The Swift argument label of an `initWith...` selector's first part:
    `initWithUIImage` -> `uiImage`, `initWithOptions` -> `options`."""
    word = part[len("initWith") :]
    leading = re.match(r"[A-Z]+(?=[A-Z][a-z]|$)", word)
    if leading:
        return leading.group(0).lower() + word[leading.end() :]
    return word[0].lower() + word[1:]


#: Objective-C types as Swift imports them.
SWIFT_TYPES = {
    "NSString": "String",
    "NSInteger": "Int",
    "NSUInteger": "UInt",
    "float": "Float",
    "double": "Double",
    "BOOL": "Bool",
}


def _swift_type(objc, names):
    objc = re.sub(r"\b(nullable|nonnull|const|__kindof)\b|\*", "", objc)
    objc = objc.strip()
    array = re.fullmatch(r"NSArray<(.*)>", objc)
    if array:
        return f"[{_swift_type(array[1], names)}]"
    return names.get(objc, SWIFT_TYPES.get(objc, objc))


def _swift_names(sources):
    """Objective-C name -> Swift name, for every `NS_SWIFT_NAME`d class,
    enum and typedef in the headers."""
    names = {}
    for source in sources:
        for swift, objc in re.findall(
            r"NS_SWIFT_NAME\((\w+)\)\s*@(?:interface|protocol)\s+(\w+)", source
        ):
            names[objc] = swift
        for objc, swift in re.findall(
            r"\b(\w+)\s*(?:NS_TYPED_ENUM\s*)?NS_SWIFT_NAME\((\w+)\);", source
        ):
            names[objc] = swift
        for objc, swift in re.findall(
            r"NS_ENUM\(\w+,\s*(\w+)\)\s*\{[^}]*\}\s*NS_SWIFT_NAME\((\w+)\)",
            source,
        ):
            names[objc] = swift
    return names


def _ios_method(statement, names):
    """`(name, {"labels", "params", "returns", "static"})` of a method
    Swift can call, or None."""
    head = re.match(r"([-+])\s*\(([^)]*)\)\s*", statement)
    rest = statement[head.end() :]
    swift = re.search(r"NS_SWIFT_NAME\((\w+)\(([\w:]*)\)\)", rest)
    parts = re.findall(r"(\w+):\(([^)]*)\)\s*\w+", rest)
    args = [(p, t) for p, t in parts if p != "error"]
    if swift:
        name, labels = swift[1], swift[2].split(":")[:-1]
    elif rest.startswith("initWith") and parts:
        name = "init"
        labels = [_swift_label(args[0][0])] + [p for p, _ in args[1:]]
    else:
        return None
    method = {
        "labels": labels,
        "params": [_swift_type(t, names) for _, t in args],
        "returns": _swift_type(head[2], names),
        "static": head[1] == "+",
    }
    return name, method


def ios_api(source, names):
    """Each `NS_SWIFT_NAME`d class's superclass, properties, initialisers
    and Swift-named methods, by Swift name."""
    source = _without_comments(source)
    classes = {}
    for objc, parent, body in re.findall(
        r"@interface\s+(\w+)\s*:\s*(\w+)[^\n]*\n(.*?)@end", source, re.S
    ):
        if objc not in names:
            continue
        entry = {"extends": names.get(parent), "properties": {}}
        entry["initializers"], entry["methods"] = [], {}
        designated = "NS_DESIGNATED_INITIALIZER" in body
        if not designated and not re.search(r"\binit\s+NS_UNAVAILABLE", body):
            entry["initializers"].append({"labels": [], "params": []})
        for statement in body.split(";"):
            statement = " ".join(statement.split())
            prop = re.match(r"@property\s*\(([^)]*)\)\s*(.*?)(\w+)$", statement)
            if prop:
                swift = _swift_type(prop[2], names)
                if "nullable" in prop[1]:
                    swift += "?"
                entry["properties"][prop[3]] = swift
            elif re.match(r"[-+]\s*\(", statement):
                found = _ios_method(statement, names)
                if found and found[0] == "init":
                    del found[1]["returns"], found[1]["static"]
                    entry["initializers"].append(found[1])
                elif found:
                    entry["methods"].setdefault(found[0], []).append(found[1])
        classes[names[objc]] = entry
    return classes


def main():
    git_dir = sys.argv[1]
    commit = subprocess.run(
        ["git", "--git-dir", git_dir, "rev-parse", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    imports, java = [], {}
    for path in JAVA_FILES:
        package, classes = java_api(_show(git_dir, path))
        imports += [f"{package}.{name}" for name in classes]
        java.update(classes)
    _resolve_java(java)
    headers = [_without_comments(_show(git_dir, p)) for p in IOS_FILES]
    names = _swift_names(headers)
    swift = {}
    for header in headers:
        swift.update(ios_api(header, names))
    api = {
        "repository": "google-ai-edge/mediapipe",
        "commit": commit,
        "kotlin": {"files": JAVA_FILES, "imports": sorted(imports)},
        "swift": {
            "module": re.search(
                r"module_name\s*=\s*'(\w+)'", _show(git_dir, PODSPEC)
            ).group(1),
            "files": IOS_FILES,
        },
    }
    api["kotlin"]["classes"] = java
    api["swift"]["classes"] = swift
    OUT.write_text(json.dumps(api, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
