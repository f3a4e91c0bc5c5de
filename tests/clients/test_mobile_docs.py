"""The export guide's MediaPipe Tasks snippets for Android (Kotlin) and iOS
(Swift) use only names that MediaPipe's sources declare, as recorded in
mediapipe_api.json (tests/clients/make_mediapipe_api.py)."""

import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "export-and-mobile.md"
API = json.loads(
    (pathlib.Path(__file__).with_name("mediapipe_api.json")).read_text(
        encoding="utf-8"
    )
)
#: Classes of the platforms an Android snippet may import.
ANDROID_IMPORTS = {
    "android.content.Context",
    "android.graphics.Bitmap",
    "android.graphics.RectF",
}
#: Names the snippets use that are the snippet's own or the language's.
OWN = {
    "kotlin": {
        *"fun val if else null return it map".split(),
        *"List Pair String Float Context Bitmap RectF".split(),
        *"topFive context bitmap roi classifier options image result".split(),
    },
    "swift": {
        *"import func let try throws if else nil return".split(),
        *"String Float UIImage UIKit CGRect Bundle main path".split(),
        *"forResource ofType map topFive photo roi classifier".split(),
        *"options image result".split(),
    },
}


def _snippet(language, containing):
    [found] = [
        block
        for block in re.findall(
            rf"```{language}\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S
        )
        if containing in block
    ]
    return found


def _names(source):
    source = re.sub(r'"[^"]*"', '""', source)
    source = re.sub(r"//[^\n]*", "", source)
    source = re.sub(r"^import [\w.]+$", "", source, flags=re.M)
    return set(re.findall(r"[A-Za-z_]\w*", source))


def _unknown(language, source):
    declared = set(API[language]["names"])
    if language == "kotlin":
        declared |= {
            name.rsplit(".", 1)[-1] for name in API[language]["classes"]
        }
    return _names(source) - declared - OWN[language]


def test_the_api_record_names_its_commit():
    assert API["repository"] == "google-ai-edge/mediapipe"
    assert re.fullmatch(r"[0-9a-f]{40}", API["commit"])
    for names in ("ImageClassifier", "classify", "setRegionOfInterest"):
        assert names in API["kotlin"]["names"] + [
            c.rsplit(".", 1)[-1] for c in API["kotlin"]["classes"]
        ]
    assert {"ImageClassifier", "classify", "regionOfInterest"} <= set(
        API["swift"]["names"]
    )


def test_the_kotlin_snippet_uses_only_mediapipes_android_api():
    source = _snippet("kotlin", "ImageClassifier")
    imports = set(re.findall(r"^import ([\w.]+)$", source, re.M))
    assert imports - ANDROID_IMPORTS <= set(API["kotlin"]["classes"])
    assert _unknown("kotlin", source) == set()


def test_the_swift_snippet_uses_only_mediapipes_ios_api():
    source = _snippet("swift", "MediaPipeTasksVision")
    assert f"import {API['swift']['module']}\n" in source
    assert _unknown("swift", source) == set()


def test_the_checks_catch_names_the_api_does_not_have():
    # Java's factory is createFromOptions; Objective-C's selector name
    # (classifyImage) is not what Swift calls.
    assert _unknown("kotlin", "ImageClassifier.createFromModelUrl(a)") == {
        "createFromModelUrl",
        "a",
    }
    assert _unknown("swift", "classifier.classifyImage(image)") == {
        "classifyImage"
    }
    assert (
        "com.google.mediapipe.tasks.vision.ImageClassifier"
        not in API["kotlin"]["classes"]
    )
