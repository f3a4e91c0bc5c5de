"""What a verification found (`VerificationReport`, `VerificationError`)
and what an export returns (`ExportResult`).

A `VerificationReport` holds one export's sizes, op list and a
`keras_vit.export.verification_checks.Comparison` per runtime and image
source, and says whether it passed (`summary()` prints it);
`VerificationError` is what a failed verification raises, and
`nothing_written(output)` is how an export says that it wrote nothing.
The checks that fill a report are in `keras_vit.export.verification_checks`, the
entry points in `keras_vit.export.verification`.
"""

import contextlib
import dataclasses


class VerificationError(ValueError):
    """An exported model failed verification (the message says how)."""


@contextlib.contextmanager
def nothing_written(output):
    """Adds to a `VerificationError` raised inside that `output` was not
    written (exports verify a temporary file before moving it into place)."""
    try:
        yield
    except VerificationError as error:
        raise VerificationError(
            f"{error}\nNothing was written to {output!r}; pass verify=False "
            "(--no-verify) to keep an unverified export."
        ) from None


@dataclasses.dataclass
class VerificationReport:
    """The result of verifying one export.

    Attributes:
        path: the exported file or folder.
        format: `"tflite"` or `"saved_model"`.
        quantization: the quantization mode checked against.
        parameters: the Keras model's parameter count.
        file_bytes: size of the file (TFLite).
        weight_bytes: bytes of constant data in it (TFLite).
        op_histogram: `{op name: count}` (TFLite).
        comparisons: a list of
            `keras_vit.export.verification_checks.Comparison`.
        failures: what failed, one sentence each; empty if it passed.
        limits: the limits applied (see `verification_checks.LIMITS`, and
            `verification_checks.FEATURE_LIMITS` for features).
        xnnpack_partitions: how many pieces LiteRT's XNNPACK delegate runs
            the graph in (see `xnnpack_partitions`; TFLite).
    """

    path: str
    format: str
    quantization: str
    parameters: int
    file_bytes: int = None
    weight_bytes: int = None
    op_histogram: dict = None
    comparisons: list = dataclasses.field(default_factory=list)
    failures: list = dataclasses.field(default_factory=list)
    limits: dict = None
    xnnpack_partitions: int = None

    @property
    def passed(self):
        return not self.failures

    @property
    def bytes_per_parameter(self):
        if self.weight_bytes is None or not self.parameters:
            return None
        return self.weight_bytes / self.parameters

    def data(self):
        """What the export was checked on, one dict per image source in
        the order compared: `source`, `images` (the most any runtime
        compared) and `labelled` (whether an accuracy was measured beside
        the agreement with Keras: the images carried labels of the
        model's classes). The sidecar records it (`"verified_on"`)."""
        found = {}
        for c in self.comparisons:
            seen = found.setdefault(
                c.source,
                {"source": c.source, "images": 0, "labelled": False},
            )
            seen["images"] = max(seen["images"], c.num_images)
            seen["labelled"] = seen["labelled"] or c.accuracy is not None
        return list(found.values())

    def summary(self):
        """The report as text: sizes, ops, a table of comparisons, what
        they were checked on, verdict."""
        lines = [
            f"{self.format} {self.path} (quantization: {self.quantization})"
        ]
        if self.file_bytes is not None:
            lines.append(
                f"  {'file' if self.format == 'tflite' else 'folder'} "
                f"{self.file_bytes:,} bytes; "
                f"{'constants' if self.format == 'tflite' else 'variables'} "
                f"{self.weight_bytes:,} "
                f"bytes for {self.parameters:,} parameters "
                f"({self.bytes_per_parameter:.2f} bytes/parameter)"
            )
        if self.op_histogram:
            ops = ", ".join(
                f"{k} {v}"
                for k, v in sorted(
                    self.op_histogram.items(), key=lambda kv: (-kv[1], kv[0])
                )
            )
            lines.append(f"  ops: {ops}")
        if self.xnnpack_partitions is not None:
            lines.append(
                f"  XNNPACK delegate: {self.xnnpack_partitions} partition(s)"
                + (
                    " (the whole graph)"
                    if self.xnnpack_partitions == 1
                    else " (ops between them run on LiteRT's builtin kernels)"
                )
            )
        if self.comparisons:
            lines.extend(_table(self.comparisons))
            features = all(c.top1_agreement is None for c in self.comparisons)
            lines.extend(_data_lines(self.data(), features))
        limits = self.limits or {}
        stated = [
            f"{text} {limits[key]:g}"
            for key, text in (
                ("max_abs", "max|Δ| <="),
                ("top1", "top-1 agreement >="),
                ("relative", "mean relative error <="),
            )
            if limits.get(key) is not None
        ]
        lines.append(f"  limits: {', '.join(stated) or 'none'}")
        if self.failures:
            lines.append("  FAILED:")
            lines.extend(f"  - {f}" for f in self.failures)
        else:
            lines.append("  passed")
        return "\n".join(lines)


def _table(comparisons):
    """The comparisons as aligned rows under a header; a column no
    comparison measured is left out (features have no top-1 class, so no
    agreement or accuracy; classes no relative error)."""
    columns = [
        ("source", lambda c: c.source),
        ("runtime", lambda c: c.runtime),
        ("images", lambda c: str(c.num_images)),
        ("max|Δ|", lambda c: f"{c.max_abs:.2e}"),
        ("mean|Δ|", lambda c: f"{c.mean_abs:.2e}"),
    ]
    if any(c.relative_error is not None for c in comparisons):
        columns.append(
            ("rel. error", lambda c: _number(c.relative_error, ".4f"))
        )
    if any(c.top1_agreement is not None for c in comparisons):
        columns.append(
            ("top-1 agree", lambda c: _number(c.top1_agreement, ".4f"))
        )
        columns.append(
            (
                "accuracy (keras)",
                lambda c: (
                    "-"
                    if c.accuracy is None
                    else f"{c.accuracy:.4f} ({c.reference_accuracy:.4f})"
                ),
            )
        )
    rows = [
        tuple(name for name, _ in columns),
        *(tuple(cell(c) for _, cell in columns) for c in comparisons),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(columns))]
    return [
        "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths))
        for row in rows
    ]


def _data_lines(data, features=False):
    """What each source checked, in words: an agreement with the Keras
    model is no accuracy, and a source without the model's labels (the
    default digits for any model not trained on them) measures none; a
    feature extractor's outputs are compared with Keras's alone."""
    lines = []
    for d in data:
        if features:
            said = "the features against the Keras model's"
        elif d["labelled"]:
            said = "labelled with the model's classes (accuracy beside it)"
        else:
            said = (
                "without labels of the model's classes: agreement with the "
                "Keras model, not accuracy"
            )
        lines.append(
            f"  checked on {d['source']}: {d['images']} images, {said}"
        )
    return lines


def _number(value, spec):
    """`value` formatted with `spec`, or `-` where it was not measured."""
    return "-" if value is None else format(value, spec)


@dataclasses.dataclass
class ExportResult:
    """What an export wrote.

    Attributes:
        path: the `.tflite`, `.onnx` or OpenVINO `.xml` file, or the
            SavedModel folder.
        metadata_path: the JSON with the labels and input spec.
        metadata: its contents.
        report: the `VerificationReport`, or `None` without verification
            and for ONNX and OpenVINO (whose check against Keras raises a
            `VerificationError` when it fails).
    """

    path: str
    metadata_path: str
    metadata: dict
    report: object = None

    def __fspath__(self):
        """`path`: a result goes where a path does (`os.fspath`, `open`,
        `pathlib.Path`), as the path `export_onnx` and `export_openvino`
        returned before they returned a result."""
        return self.path
