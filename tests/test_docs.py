"""The documentation site builds, documents every public name, and its
Python snippets run and do what their comments say.

Snippets are found by a line they contain and executed as written, as
tests/test_readme.py does for the README; a snippet that cannot run here
(a download, a GPU, a TPU, a phone) is marked on the line before it with
`<!-- not-run: reason -->`, and is then parsed and its keras_vit names
checked to exist. Every snippet is one or the other (`test_every_snippet_
is_run_or_marked`).
"""

import ast
import importlib
import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
import warnings

import keras
import numpy as np
import pytest

import keras_vit
from tests.helpers import TINY
from tests.helpers import TINY_BLOCK
from tests.helpers import random_images
from tests.helpers import randomize_weights

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
API = os.path.join(DOCS, "api")
NOT_RUN = re.compile(r"<!-- not-run: (.+?) -->")
BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.S | re.M)
#: A ViT for snippets that name a big builder: the API path is what is run
#: (32 px patches: a 7x7 grid at the snippets' 224 px).
TINY_BACKBONE = dict(TINY_BLOCK, patch_size=32)


def _pages():
    for folder, _, files in os.walk(DOCS):
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(folder, name)


def _read(path):
    with open(path, encoding="utf-8") as file:
        return file.read()


def _blocks():
    """(page, source, not-run reason or None) of every ```python block."""
    for page in _pages():
        text = _read(page)
        for match in BLOCK.finditer(text):
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marked = NOT_RUN.fullmatch(before.strip())
            yield page, match.group(1), marked.group(1) if marked else None


def _snippet(containing):
    found = [
        source
        for _, source, reason in _blocks()
        if reason is None and containing in source
    ]
    assert len(found) == 1, (
        f"{len(found)} runnable docs snippets contain {containing!r}"
    )
    return found[0]


def _run(source, namespace, skip=()):
    """Executes `source` in a copy of `namespace`; returns the values of its
    expression statements and the namespace it left.

    Statements containing any string of `skip` are left out."""
    tree = ast.parse(source)
    values = []
    body = []
    for node in tree.body:
        if any(s in ast.get_source_segment(source, node) for s in skip):
            continue
        if isinstance(node, ast.Expr):  # `expr` -> `_values.append(expr)`
            node = ast.Expr(
                ast.Call(
                    ast.Attribute(
                        ast.Name("_values", ast.Load()), "append", ast.Load()
                    ),
                    [node.value],
                    [],
                )
            )
        body.append(node)
    module = ast.fix_missing_locations(ast.Module(body, type_ignores=[]))
    namespace = {**namespace, "_values": values}
    exec(compile(module, "<docs snippet>", "exec"), namespace)
    return values, namespace


# --- the site ----------------------------------------------------------------


@pytest.mark.slow
def test_site_builds_strictly(tmp_path):
    # Strict: a broken link, a missing anchor, an unresolved `:::` reference
    # or a docstring griffe cannot parse fails the build.
    mkdocs = shutil.which("mkdocs", path=os.path.dirname(sys.executable))
    if mkdocs is None:
        pytest.skip("mkdocs is not installed (it is in the dev extra)")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "api" / "export" / "index.html").exists()


def _directives():
    """The dotted paths of every `::: path` in the API pages."""
    paths = set()
    for page in _pages():
        if page.startswith(API):
            paths |= set(re.findall(r"^::: (\S+)", _read(page), flags=re.M))
    return paths


def _resolve(path, modules_first=False):
    """The object `path` names, as Python's attribute lookup finds it (a
    package's attribute before a submodule of the same name), or with
    `modules_first` as griffe does for `:::` (the submodule first);
    submodules the package does not import are imported. AttributeError or
    ImportError when there is no such name."""
    first, *rest = path.split(".")
    obj = importlib.import_module(first)
    for part in rest:
        submodule = f"{getattr(obj, '__name__', '')}.{part}"
        if inspect.ismodule(obj) and (modules_first or not hasattr(obj, part)):
            try:
                obj = importlib.import_module(submodule)
                continue
            except ModuleNotFoundError:
                pass
        obj = getattr(obj, part)
    return obj


def _public(module):
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and getattr(obj, "__module__", None) == module.__name__
    ]


PUBLIC_MODULES = (
    "keras_vit",
    "keras_vit.layers",
    "keras_vit.registry",
    "keras_vit.weights",
    "keras_vit.patch_grid",
    "keras_vit.data",
    "keras_vit.training",
    "keras_vit.export",
    "keras_vit.visualize",
    "keras_vit.evaluation",
    "keras_vit.benchmark",
)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_is_documented(module_name):
    module = importlib.import_module(module_name)
    documented = [_resolve(path, modules_first=True) for path in _directives()]
    builders_table = _read(os.path.join(API, "keras_vit.md"))
    missing = []
    for name in _public(module):
        obj = getattr(module, name)
        if inspect.ismodule(obj):
            # A submodule is documented by its own page, or a `:::` of it.
            if obj in documented or any(
                p.startswith(obj.__name__ + ".") for p in _directives()
            ):
                continue
        elif any(obj is d for d in documented):
            continue
        elif name in keras_vit.registry.BUILDERS:
            # Builders are made when the package is imported, so griffe
            # cannot read them; the page lists them as a table, checked here.
            numbers = keras_vit.registry.get_variant(
                keras_vit.registry.BUILDERS[name]
            )
            row = f"| `{name}` | {keras_vit.registry.BUILDERS[name]} | "
            row += f"{numbers['hidden_dim']} | {numbers['num_layers']} | "
            row += f"{numbers['num_heads']} | {numbers['mlp_dim']} |"
            if row in builders_table:
                continue
        missing.append(name)
    assert not missing, f"{module_name}: not in docs/api: {missing}"


def test_every_api_directive_resolves():
    for path in sorted(_directives()):
        _resolve(path, modules_first=True)  # raises, naming it


# --- every snippet is run or marked ------------------------------------------


def _snippet_keys():
    """The strings this module's tests find snippets by."""
    tree = ast.parse(_read(__file__))
    return [
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", None) == "_snippet"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ]


def test_every_snippet_is_run_or_marked():
    keys = _snippet_keys()
    unrun = []
    for page, source, reason in _blocks():
        if reason is None and not any(key in source for key in keys):
            unrun.append(f"{os.path.relpath(page, ROOT)}: {source[:60]!r}")
    assert not unrun, "snippets neither run by a test nor marked: " + "\n".join(
        unrun
    )


def _keras_vit_names(source):
    """The dotted keras_vit names a snippet uses: `keras_vit.a.b`, and
    `x.a` for every `from keras_vit[.m] import x`."""
    tree = ast.parse(source)
    roots = {"keras_vit": "keras_vit"}
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "keras_vit"
        ):
            for alias in node.names:
                roots[alias.asname or alias.name] = (
                    f"{node.module}.{alias.name}"
                )
                names.add(f"{node.module}.{alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain = []
            inner = node
            while isinstance(inner, ast.Attribute):
                chain.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id in roots:
                names.add(".".join([roots[inner.id], *reversed(chain)]))
    return names


def _exists(path):
    """Whether `path` names a module, or an attribute of one (also a method
    of a class, or a submodule not imported by its package)."""
    try:
        _resolve(path)
    except (AttributeError, ImportError):
        return False
    return True


def test_not_run_snippets_parse_and_use_real_names():
    checked = 0
    for page, source, reason in _blocks():
        if reason is None:
            continue
        assert reason.strip(), f"{page}: a not-run mark without a reason"
        names = _keras_vit_names(source)  # SyntaxError names the snippet
        unknown = sorted(n for n in names if not _exists(n))
        assert not unknown, f"{page}: {unknown} in {source[:80]!r}"
        checked += 1
    assert checked > 0


def test_names_check_catches_a_wrong_name():
    # The check above can fail: a name keras_vit does not have is found.
    names = _keras_vit_names(
        "from keras_vit import visualize\n"
        "visualize.no_such_function(model)\nkeras_vit.ViT_B16()\n"
    )
    assert "keras_vit.visualize.no_such_function" in names
    assert not _exists("keras_vit.visualize.no_such_function")
    assert _exists("keras_vit.ViT_B16") and _exists("keras_vit.export.tflite")


# --- the guides' snippets, run -----------------------------------------------


def test_index_quick_start(monkeypatch):
    # The snippet as written, with ViT_B16 shrunk to a tiny ViT at the same
    # 224 px (B/16 itself is built by test_models_constructors).
    source = _snippet("model = keras_vit.ViT_B16(num_classes=10)")
    built = {}

    def vit_b16(**kwargs):
        built.update(kwargs)
        return keras_vit.ViT(image_size=224, **TINY_BACKBONE, **kwargs)

    monkeypatch.setattr(keras_vit, "ViT_B16", vit_b16)
    images = random_images((2, 224, 224, 3))
    labels = np.array([3, 7])
    _, after = _run(source, {"images": images, "labels": labels})
    assert built == {"num_classes": 10}
    model = after["model"]
    assert model.output_shape == (None, 10)
    assert model.optimizer.iterations.numpy() == 1  # one fit step on 2 images


@pytest.mark.slow
def test_models_constructors():
    values, _ = _run(_snippet("keras_vit.ViT_B16(image_size=(224, 320))"), {})
    s16_384, wide, features, tokens, gap, s8, custom = values
    assert tuple(s16_384.grid_size) == (24, 24)
    assert s16_384.output_shape == (None, 37)
    assert tuple(wide.grid_size) == (14, 20)
    assert features.output_shape == (None, 768)
    assert tokens.output_shape == (None, 197, 768)
    assert gap.num_prefix_tokens == 0
    assert (s8.patch_size, s8.hidden_dim) == (8, 384)
    assert s8.output_shape == (None, 10)
    assert tuple(custom.grid_size) == (8, 8) and custom.num_layers == 6


def test_models_dynamic_image_size():
    values, after = _run(_snippet("model(np.zeros((1, 48, 80, 3)))"), {})
    reference, wide, grid, b16 = values
    assert reference.shape == wide.shape == (1, 10)
    assert grid == (6, 10) and tuple(after["model"].grid_size) == (4, 4)
    assert b16.dynamic_image_size and b16.input_shape == (None, None, None, 3)


def test_models_parameter_counts_table():
    # The table's counts are the builders' (224 px, 1000 classes).
    text = _read(os.path.join(DOCS, "models.md"))
    rows = re.findall(r"^\| `(ViT_\w+)` \|.*\| ([\d,]+) \|$", text, flags=re.M)
    assert [name for name, _ in rows] == list(keras_vit.registry.BUILDERS)
    for name, count in rows[:3]:  # the small ones; test_builders has all
        model = getattr(keras_vit, name)()
        assert model.count_params() == int(count.replace(",", "")), name


def test_models_pooling_list_names_every_choice():
    # The audit: the list left out "map" (attention pooling).
    from keras_vit.options import MODEL_POOLINGS

    text = " ".join(_read(os.path.join(DOCS, "models.md")).split())
    bullet = text[text.index("`pooling` (") :].split("), `class_token`")[0]
    for pooling in MODEL_POOLINGS:
        assert f'`"{pooling}"`' in bullet, pooling
    assert "`None`" in bullet


@pytest.mark.slow
def test_models_hybrids():
    values, _ = _run(_snippet("keras_vit.ViT_R50_B16(num_classes=10)"), {})
    r50, resnet_stem, keras_stem = values
    assert tuple(r50.grid_size) == (14, 14) and r50.output_shape == (None, 10)
    assert resnet_stem.stem is not None
    assert resnet_stem.output_shape == (None, 10)
    assert tuple(keras_stem.grid_size) == (7, 7)  # ResNet50V2's 32x reduction


def test_models_mixed_precision():
    try:
        _run(_snippet('keras.config.set_dtype_policy("mixed_bfloat16")'), {})
        model = keras_vit.ViT(**TINY)
        assert model.dtype_policy.compute_dtype == "bfloat16"
        out = model(random_images((2, 32, 32, 3)))
    finally:
        keras.config.set_dtype_policy("float32")
    assert keras.backend.standardize_dtype(out.dtype) == "float32"


def test_models_keras_int8_weights(tmp_path, monkeypatch):
    source = _snippet('model.save("vit_int8.keras")')
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # layers without weights to quantize
        _run(source, {"model": keras_vit.ViT(**TINY)})
    loaded = keras.saving.load_model("vit_int8.keras")
    assert loaded.get_layer("head").quantization_mode == "int8"


def test_pretrained_classify_with_an_imagenet_release(tmp_path, monkeypatch):
    from keras.src.applications import imagenet_utils
    from PIL import Image

    source = _snippet("imagenet_utils.decode_predictions")
    assert 'weights="augreg_in21k_ft_in1k")' in source
    # The package's resizing (bilinear, antialiased), not load_img's
    # nearest neighbour.
    assert "load_image_files(" in source and "load_img" not in source
    preset = keras_vit.registry.find_preset("B/16", "augreg_in21k_ft_in1k")
    assert preset["num_classes"] == 1000 and preset["image_size"] == 224
    # Offline: a small 1000-class model whose head favours class 281, and
    # Keras's class index in its real format ({"281": [wnid, name], ...}).
    model = keras_vit.ViT(**{**TINY, "num_classes": 1000})
    bias = np.zeros(1000, "float32")
    bias[281] = 5.0
    model.get_layer("head").bias.assign(bias)
    index = {str(i): [f"n{i:08d}", f"class_{i}"] for i in range(1000)}
    index["281"] = ["n02123045", "tabby"]
    monkeypatch.setattr(imagenet_utils, "CLASS_INDEX", index)
    Image.fromarray(random_images((1, 40, 50, 3))[0].astype("uint8")).save(
        tmp_path / "cat.jpg"
    )
    monkeypatch.chdir(tmp_path)
    values, after = _run(source, {"model": model}, skip=("weights=",))
    assert after["images"].shape == (1, *model.image_size, 3)
    assert after["probs"].shape == (1, 1000)
    ((top, *_),) = values[-1]
    assert top[:2] == ("n02123045", "tabby") and top[2] > 0.1


def test_pretrained_presets_in_the_not_run_snippet_exist():
    source = next(
        s for _, s, r in _blocks() if r and "from_preset(" in s and "npz" in s
    )
    for name in re.findall(r'weights="(\w+)"', source):
        assert keras_vit.registry.find_preset("B/16", name) is not None, name
    for name in re.findall(r'from_preset\("(\w+)"\)', source):
        assert keras_vit.registry.named_preset(name) is not None, name


def test_pretrained_save_npz(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = keras_vit.ViT(**TINY)
    _run(
        _snippet('keras_vit.weights.save_npz(model, "mine.npz")'),
        {
            "keras_vit": keras_vit,
            "model": model,
        },
    )
    reloaded = keras_vit.ViT.from_preset("mine.npz", **TINY)
    for a, b in zip(model.weights, reloaded.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _photo_folder(root, classes=("cat", "dog"), per_class=2):
    from PIL import Image

    for c, name in enumerate(classes):
        (root / "photos" / name).mkdir(parents=True)
        images = random_images((per_class, 40, 50, 3), seed=c)
        for i, image in enumerate(images.astype("uint8")):
            Image.fromarray(image).save(root / "photos" / name / f"{i}.png")


def test_fine_tuning_with_keras(tmp_path, monkeypatch):
    # The snippet as written, on a folder of 4 photos in 2 classes, with
    # ViT_B16 shrunk to a tiny ViT and the release's download left out (its
    # preset must exist).
    monkeypatch.chdir(tmp_path)
    _photo_folder(tmp_path)
    source = _snippet('"sgd", 0.003, 0.0, warmup_steps=steps // 20')
    assert keras_vit.registry.find_preset("B/16", "augreg_in21k") is not None
    built = {}

    def vit_b16(weights=None, **kwargs):
        built.update(kwargs, weights=weights)
        return keras_vit.ViT(**TINY_BACKBONE, **kwargs)

    monkeypatch.setattr(keras_vit, "ViT_B16", vit_b16)
    _, after = _run(source, {})
    assert built["weights"] == "augreg_in21k" and built["num_classes"] == 2
    model = after["model"]
    assert model.output_shape == (None, 2) and model.image_size == (384, 384)
    optimizer = model.optimizer
    assert isinstance(optimizer, keras.optimizers.SGD)
    assert optimizer.momentum == 0.9 and not optimizer.weight_decay
    assert optimizer.iterations.numpy() == 10  # 10 epochs of one batch


def _train_commands(page):
    """The flat configs of the `keras-vit train` commands in `page`'s sh
    blocks, in order."""
    import dataclasses
    import shlex

    from keras_vit.cli import build_parser
    from keras_vit.cli.train import config_from_args
    from keras_vit.training.config import flatten

    text = _read(os.path.join(DOCS, page))
    configs = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            argv = shlex.split(line, comments=True)
            if argv[:2] == ["keras-vit", "train"]:
                args = build_parser().parse_args(argv[1:])
                config = config_from_args(args)
                configs.append(flatten(dataclasses.asdict(config)))
    return configs


def test_fine_tuning_flag_by_flag_is_the_recipe():
    # The audit: "spelled out flag by flag" trained at a learning rate of
    # 0.01 (the recipe's is 0.003), with 100 warm-up steps (5%) and batch 32.
    commands = _train_commands("fine-tuning.md")
    recipe, spelled_out = (c for c in commands if c["model"] == "ViT_B16")
    assert recipe["learning_rate"] == 0.003 and recipe["batch_size"] == 64
    assert {
        k: (v, spelled_out.get(k))
        for k, v in recipe.items()
        if v != spelled_out.get(k)
    } == {}


@pytest.mark.slow
def test_fine_tuning_masked_patch_prediction(tmp_path, monkeypatch):
    # The snippet as written, on a folder of 4 photos, with ViT_S16 shrunk
    # to a tiny ViT of the same resolution (the API path is what is tested).
    from PIL import Image

    monkeypatch.chdir(tmp_path)
    (tmp_path / "photos").mkdir()
    for i, image in enumerate(random_images((4, 40, 50, 3)).astype("uint8")):
        Image.fromarray(image).save(tmp_path / "photos" / f"{i}.png")

    def tiny_s16(weights=None, **kwargs):  # a builder: weights load after
        if weights is None:
            return keras_vit.ViT(**TINY_BACKBONE, **kwargs)
        return keras_vit.ViT.from_preset(weights, **TINY_BACKBONE, **kwargs)

    monkeypatch.setattr(keras_vit, "ViT_S16", tiny_s16)
    _, after = _run(
        _snippet("mpp = keras_vit.training.MaskedPatchPrediction("), {}
    )
    history = after["mpp"].history.history
    assert len(history["loss"]) == 100
    assert history["loss"][-1] < history["loss"][0]
    model = after["model"]
    assert model.output_shape == (None, 10)
    np.testing.assert_array_equal(
        np.asarray(model.get_layer("block_0").weights[0]),
        np.asarray(after["mpp"].backbone.get_layer("block_0").weights[0]),
    )


def test_training_precision_table_agrees_with_the_code():
    from keras_vit.training import recipe

    text = _read(os.path.join(DOCS, "training-at-scale.md"))
    assert "| TPU | `mixed_bfloat16` |" in text
    assert recipe.dtype_policy("auto", "tpu") == "mixed_bfloat16"
    assert "| CPU with AVX-512 BF16 or AMX | `mixed_bfloat16` |" in text
    assert recipe.dtype_policy("auto", "cpu", cpu_bfloat16=True) == (
        "mixed_bfloat16"
    )
    assert "| other CPUs | float32 |" in text
    assert recipe.dtype_policy("auto", "cpu", cpu_bfloat16=False) == "float32"


def test_training_gpu_precision_agrees_with_the_code():
    from keras_vit.training import recipe

    text = _read(os.path.join(DOCS, "training-at-scale.md"))
    assert "compute capability 8.0 or later" in text
    assert "| older GPU | `mixed_float16`" in text
    parameters = inspect.signature(recipe.dtype_policy).parameters
    gpu = [p for p in parameters if "capability" in p]
    assert gpu, "dtype_policy takes no GPU compute capability"
    assert recipe.dtype_policy("auto", "gpu", **{gpu[0]: (8, 0)}) == (
        "mixed_bfloat16"
    )
    assert recipe.dtype_policy("auto", "gpu", **{gpu[0]: (7, 5)}) == (
        "mixed_float16"
    )


def test_training_rerun_rules_name_every_refused_setting():
    # The audit: the page let a rerun change "the recipe's numbers" and
    # left batch size (refused since a0dd087) and the dataset's examples
    # (since 61237b1) out of what is refused.
    from keras_vit.training.train import RESUME_SETTINGS

    text = " ".join(_read(os.path.join(DOCS, "training-at-scale.md")).split())
    may = text[text.index("A rerun may change") :]
    may, refused = may.split("is refused before it runs", 1)
    may, refused_list = may.split("One with another", 1)
    words = {
        "model": "model (variant",
        "image_size": "image size",
        "patch_size": "patch size",
        "model_kwargs": "model options",
        "dataset": "dataset",
        "objective": "objective",
        "masked_patches": "masked-patch options",
        "optimizer": "optimizer,",
        "validation_split": "validation split",
        "seed": "seed",
        "batch_size": "batch size",
    }
    assert sorted(words) == sorted(RESUME_SETTINGS)
    for name in RESUME_SETTINGS:
        assert words[name] in refused_list, name
    assert "batch" not in may and "recipe's numbers" not in may
    assert "classes or examples have changed" in refused


def test_export_verification_limits_agree_with_the_code():
    # The audit: the page gave the classifiers' limits only, not the
    # relative errors a feature extractor's exports are held to.
    from keras_vit.export.verification_checks import FEATURE_LIMITS
    from keras_vit.export.verification_checks import LIMITS

    text = " ".join(_read(os.path.join(DOCS, "export-and-mobile.md")).split())
    limits = text[text.index("Limits: float32") :]
    limits = limits[: limits.index("The reference kernels")]

    def power(x):  # 1e-4, as the page writes it
        return f"{x:.0e}".replace("e-0", "e-")

    assert f"float32 max |Δ| ≤ {power(LIMITS['none']['max_abs'])}" in limits
    assert f"float16 ≤ {power(LIMITS['float16']['max_abs'])}" in limits
    assert f"≥ {LIMITS['int8']['top1']:g} for `int8`" in limits
    features = limits[limits.index("A feature extractor") :]
    assert f"|Δ| ≤ {power(FEATURE_LIMITS['none']['max_abs'])}" in features
    for mode in ("float16", "dynamic", "int16x8", "int8"):
        relative = FEATURE_LIMITS[mode]["relative"]
        assert re.search(rf"\b{relative:g} for `{mode}`", features), mode


@pytest.mark.parametrize(
    "path",
    [
        "docs/fine-tuning.md",
        "examples/finetune.py",
        "examples/masked_patch_prediction.py",
    ],
)
def test_fashion_mnist_is_not_called_offline(path):
    # The audit: "without any download" and "Offline" were false on a
    # fresh machine: Fashion-MNIST downloads unless the Keras cache or
    # Debian's package has it.
    text = " ".join(_read(os.path.join(ROOT, path)).split())
    assert "without any download" not in text
    assert not re.search(r"\boffline on Fashion-MNIST|^Offline,", text)
    assert "`dataset-fashion-mnist`" in text and "`make demo`" in text
    assert re.search(r"download(s|ed) (it )?once through Keras", text)


@pytest.mark.slow
def test_export_tflite_snippet(tmp_path, monkeypatch):
    pytest.importorskip("ai_edge_litert")
    monkeypatch.chdir(tmp_path)
    model = keras_vit.ViT(**TINY)
    randomize_weights(model)  # a zero head would give every class a tie
    values, after = _run(
        _snippet('export.export_tflite(model, "vit.tflite"'), {"model": model}
    )
    assert (tmp_path / "vit.tflite").exists() and (
        tmp_path / "vit.json"
    ).exists()
    assert values[-1] == [f"class_{i}" for i in range(TINY["num_classes"])]
    assert after["result"].metadata["quantization"] == "dynamic"


def test_serving_image_files_snippet(tmp_path, monkeypatch):
    import shutil

    from keras_vit import export
    from keras_vit.data.images import load_image_files

    monkeypatch.chdir(tmp_path)
    model = keras_vit.ViT(**TINY, image_resize={"crop_pct": 0.9})
    randomize_weights(model)
    (tmp_path / "serving" / "vit").mkdir(parents=True)
    export.export_saved_model(model, "serving/vit/1", verify=False)
    shutil.copy(keras_vit.sample_image_path(), "cat.jpg")
    _, after = _run(_snippet('signatures["serving_bytes"]'), {})
    pixels = load_image_files(["cat.jpg"], 32, image_resize={"crop_pct": 0.9})
    np.testing.assert_allclose(
        after["probabilities"].numpy(),
        model.predict(pixels, verbose=0),
        atol=1e-5,
    )


@pytest.mark.slow
def test_export_openvino(tmp_path, monkeypatch):
    pytest.importorskip("openvino")
    monkeypatch.chdir(tmp_path)
    model = keras_vit.ViT(**TINY)
    randomize_weights(model)  # a zero head would give every class a tie
    images = random_images((1, *model.input_shape[1:]))
    _, namespace = _run(
        _snippet('openvino.export_openvino(model, "vit.xml")'),
        {"model": model, "images": images},
    )
    assert sorted(os.listdir(tmp_path)) == ["vit.bin", "vit.json", "vit.xml"]
    expected = model.predict(images, verbose=0)
    assert np.ptp(expected) > 1e-3
    np.testing.assert_allclose(namespace["probabilities"], expected, atol=1e-5)


def test_looking_inside_intermediates():
    model = keras_vit.ViT(**TINY)
    randomize_weights(model)  # a zero head would give every class a tie
    images = random_images((2, 32, 32, 3))
    (blocks, attentions, output), _ = _run(
        _snippet("inter = model.intermediates_model()"),
        {"model": model, "images": images},
    )
    assert len(blocks) == len(attentions) == TINY["num_layers"]
    assert tuple(blocks[0].shape) == (2, 17, TINY["hidden_dim"])
    weights = np.asarray(attentions[-1])
    assert weights.dtype == np.float32
    assert weights.shape == (2, TINY["num_heads"], 17, 17)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
    expected = np.asarray(model(images))
    assert np.ptp(expected) > 1e-3
    np.testing.assert_allclose(np.asarray(output), expected, atol=1e-6)


def test_looking_inside_visualize(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = keras_vit.ViT(**TINY)
    images = random_images((2, 32, 32, 3))
    (figure, distances, similarity, filters, files), after = _run(
        _snippet("from keras_vit import visualize"),
        {"model": model, "images": images},
    )
    assert after["result"].maps.shape == (2, 4, 4)
    assert figure.__class__.__name__ == "Figure"
    figure.clf()
    assert distances.shape == (TINY["num_layers"], TINY["num_heads"])
    assert similarity.shape == (4, 4, 4, 4)
    # n=28 is more than the 16 filters there are
    assert filters.shape == (TINY["hidden_dim"], 8, 8, 3)
    assert (tmp_path / "figures" / "index.html").exists() and len(files) >= 5


def test_few_shot(capsys):
    model = keras_vit.ViT(**{**TINY, "num_classes": 10})
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(4), 60)  # 30 a class each side: 25 shots
    # Each class along its own axis, plus noise: linearly separable.
    features = 0.3 * rng.normal(size=(240, 8)) + 3 * np.eye(8)[labels]
    namespace = {
        "model": model,
        "train_x": features[::2],
        "train_y": labels[::2],
        "test_x": features[1::2],
        "test_y": labels[1::2],
        "num_classes": 4,
    }
    values, after = _run(_snippet("evaluation.few_shot(model,"), namespace)
    _, five_shot, linear = values  # print's None, mean(5), the result
    assert after["result"].summary() in capsys.readouterr().out
    assert five_shot == after["result"].mean(5) and 0.0 <= five_shot <= 1.0
    # Separable features: far above 4-class chance (0.25) at 25 shots.
    assert linear.mean(25) > 0.9


def test_griffe_extension_fences_doctest_examples():
    # mkdocs.yml's extension: the docstrings' `>>>` lines become code.
    pytest.importorskip("griffe")
    spec = importlib.util.spec_from_file_location(
        "griffe_examples", os.path.join(DOCS, "griffe_examples.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = "Example:\n\n>>> x = 1\n>>> x\n1\n\nAfter."
    assert module.fence_examples(text) == (
        "Example:\n\n```pycon\n>>> x = 1\n>>> x\n1\n```\n\nAfter."
    )
    assert module.fence_examples("No examples.") == "No examples."
