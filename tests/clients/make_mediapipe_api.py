"""Writes tests/clients/mediapipe_api.json: the names MediaPipe Tasks'
Android (Java, called from Kotlin) and iOS (Objective-C, called from Swift)
image classifier and embedder APIs declare, read from a git clone of
google-ai-edge/mediapipe at one commit. tests/clients/test_mobile_docs.py
checks the mobile guide's MediaPipe snippets against it.

    python tests/clients/make_mediapipe_api.py /path/to/mediapipe/.git

Android: every class (by its full name, what an `import` names) and
every method and field declared in the files below. iOS: the Swift name of
each class (`NS_SWIFT_NAME`), its properties, the labels of its methods'
Swift names, and the argument labels Swift gives its `initWith...`
initialisers (the `error:` argument becomes `throws`).
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
    return re.sub(r"/\*.*?\*/|//[^\n]*", "", source, flags=re.S)


def java_api(source):
    """`(classes, names)`: the full names of the file's classes (nested
    ones as `Outer.Inner`) and the names of its methods and fields."""
    source = _without_comments(source)
    package = re.search(r"^package ([\w.]+);", source, re.M).group(1)
    classes, stack, depth, pending = [], [], 0, None
    for token in re.finditer(r"\bclass\s+(\w+)|[{}]", source):
        if token.group(1):
            pending = token.group(1)
        elif token.group(0) == "{":
            if pending:
                stack.append((pending, depth))
                outer = ".".join(name for name, _ in stack)
                classes.append(f"{package}.{outer}")
                pending = None
            depth += 1
        else:
            depth -= 1
            if stack and stack[-1][1] == depth:
                stack.pop()
    names = set(re.findall(r"\b(\w+)\s*\(", source))
    names |= set(re.findall(r"\b(\w+)\s*[;=]", source))
    return classes, names


def _swift_label(part):
    """The Swift argument label of an `initWith...` selector's first part:
    `initWithUIImage` -> `uiImage`, `initWithOptions` -> `options`."""
    word = part[len("initWith") :]
    leading = re.match(r"[A-Z]+(?=[A-Z][a-z]|$)", word)
    if leading:
        return leading.group(0).lower() + word[leading.end() :]
    return word[0].lower() + word[1:]


def ios_api(source):
    """The Swift names a header declares: classes, properties, method
    labels and initialiser labels."""
    source = _without_comments(source)
    names = set()
    for swift in re.findall(r"NS_SWIFT_NAME\(([^)]*)\)", source):
        names |= set(re.findall(r"\w+", swift))
    names |= set(re.findall(r"@property\([^)]*\)[^;]*?\b(\w+);", source))
    for selector in re.findall(r"[-+]\s*\([^)]*\)\s*(init\w*:[^;]*)", source):
        parts = re.findall(r"(\w+):\(", selector)
        if parts and parts[0].startswith("initWith"):
            names.add(_swift_label(parts[0]))
            names |= {p for p in parts[1:] if p != "error"}
    return names


def main():
    git_dir = sys.argv[1]
    commit = subprocess.run(
        ["git", "--git-dir", git_dir, "rev-parse", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    classes, java_names = [], set()
    for path in JAVA_FILES:
        found, names = java_api(_show(git_dir, path))
        classes += found
        java_names |= names
    swift_names = set()
    for path in IOS_FILES:
        swift_names |= ios_api(_show(git_dir, path))
    api = {
        "repository": "google-ai-edge/mediapipe",
        "commit": commit,
        "kotlin": {
            "files": JAVA_FILES,
            "classes": sorted(set(classes)),
            "names": sorted(java_names),
        },
        "swift": {
            "module": re.search(
                r"module_name\s*=\s*'(\w+)'", _show(git_dir, PODSPEC)
            ).group(1),
            "files": IOS_FILES,
            "names": sorted(swift_names),
        },
    }
    OUT.write_text(json.dumps(api, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
