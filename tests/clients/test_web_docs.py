"""The export guide's JavaScript snippet and the demo page use only names
that the pinned `@mediapipe/tasks-vision` declares (its vision.d.ts)."""

import re

from tests.clients import browser

PAGE = browser.ROOT / "docs" / "export-and-mobile.md"

#: Names the snippets use that are the page's own or JavaScript's.
OWN = {
    "await",
    "const",
    "from",
    "import",
    "imageElement",
    "fileset",
    "classifier",
    "index",
    "score",
}


def _declared():
    browser.require_package()
    path = browser.BUNDLE / "vision.d.ts"
    return set(re.findall(r"\w+", path.read_text(encoding="utf-8")))


def _names(source):
    source = re.sub(r'"[^"]*"', '""', source)
    source = re.sub(r"//[^\n]*", "", source)
    return set(re.findall(r"[A-Za-z_]\w*", source))


def test_the_guide_snippet_uses_only_declared_names():
    [snippet] = re.findall(
        r"```javascript\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S
    )
    unknown = _names(snippet) - _declared() - OWN
    assert not unknown, unknown


def test_the_names_check_catches_an_unknown_name():
    unknown = _names("ImageClassifier.createFromModelUrl(a)") - _declared()
    assert "createFromModelUrl" in unknown
    assert "ImageClassifier" not in unknown
