"""A griffe extension for the API reference: docstring examples as code.

keras_vit's docstrings write their examples as `>>>` lines at the same
indentation as the text above them (house style), which Markdown would
read as nested block quotes. This wraps each run of `>>>` / `...` lines and
the output lines after them in a `pycon` code block when the docstrings are
loaded, so the sources stay as they are. Used by mkdocs.yml; needs no
TensorFlow (griffe reads the sources statically).
"""

import griffe

PROMPTS = (">>>", "...")


def fence_examples(text):
    """Returns `text` with every run of doctest lines in a ```pycon block."""
    out, inside = [], False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(PROMPTS) and not inside:
            out.append("```pycon")
            inside = True
        elif inside and not stripped:
            out.append("```")
            inside = False
        out.append(line.strip() if inside else line)
    if inside:
        out.append("```")
    return "\n".join(out)


class DoctestExamples(griffe.Extension):
    """Fences the doctest examples of every object's docstring."""

    def on_object(self, *, obj, **kwargs):
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_examples(obj.docstring.value)
