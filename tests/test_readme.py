"""The README's quickstarts run as pasted, and its tables and claims hold.

Every fenced block of README.md is one of `BLOCKS` (found by a line it
contains, so editing the prose around it breaks nothing) and is run here:
Python blocks are executed as written, shell blocks line by line in this
process — `keras-vit ...` through `keras_vit.cli.main` (argv by `shlex`,
globs expanded), `python -c CODE` by executing CODE, `mkdir -p` by
`os.makedirs`, `pip` by checking the extras it names exist. Only what
needs the network or a big machine is replaced: the preset downloads by
tiny checkpoints written on the spot (`tiny_releases`: the B/16 variant
shrunk to a 1-block, 16-wide ViT, so the README's `ViT_B16` and preset
names stay as written), the flowers download by a tiny image folder, and
`keras-vit train`'s `--epochs` / `--batch-size` by small numbers (the
work, not the flags' meaning).
"""

import glob
import os
import re
import shlex
import shutil

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import registry
from keras_vit.cli import build_parser
from keras_vit.cli import main
from tests.helpers import TINY_BLOCK
from tests.helpers import random_images

ROOT = os.path.dirname(os.path.dirname(__file__))
README = os.path.join(ROOT, "README.md")

#: Every fenced block of the README: name -> (language, a line it holds).
BLOCKS = {
    "set-up": ("sh", "make test"),
    "install": ("sh", "pip install . "),
    "classify in python": ("python", "keras_vit.imagenet_class_names()"),
    "classify in the shell": ("sh", "keras-vit predict vit_b16_augreg"),
    "fine-tune": ("sh", "--output runs/flowers\n"),
    "at scale": ("sh", "--strategy auto --mixed-precision auto"),
    "export": ("sh", "--format tflite --output flowers.tflite"),
    "family to tflite": ("sh", "keras-vit convert hf://timm/vit_small"),
    "citation": ("bibtex", "@inproceedings{dosovitskiy2021vit,"),
}


#: B/16 as the tests build it: the README's names, a tiny model (its
#: patch size kept, so each preset's resolution makes its own grid).
TINY_B16 = dict(TINY_BLOCK, patch_size=16)
#: The class the tiny ImageNet-1k release's head favours (ILSVRC's 281,
#: "tabby cat").
FAVOURED = 281


def _readme():
    with open(README, encoding="utf-8") as file:
        return file.read()


def _blocks():
    """Every fenced block: `(language, text)`."""
    return re.findall(r"^```(\w*)\n(.*?)^```", _readme(), flags=re.S | re.M)


def _block(name):
    language, containing = BLOCKS[name]
    found = [
        text
        for lang, text in _blocks()
        if lang == language and containing in text
    ]
    assert len(found) == 1, f"{len(found)} README blocks hold {containing!r}"
    return found[0]


def _commands(text):
    """A shell block's commands as argv lists (continuations joined,
    comments dropped)."""
    joined = text.replace("\\\n", " ")
    return [
        argv
        for line in joined.splitlines()
        if (argv := shlex.split(line, comments=True))
    ]


def _extras():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as file:
        project = tomllib.load(file)["project"]
    return project["name"], set(project["optional-dependencies"])


def _check_pip(argv):
    """A `pip` line installs this checkout (`.`: nothing is published yet)
    with extras that exist, or TensorFlow's CUDA build."""
    _, extras = _extras()
    assert argv[1] == "install", argv
    for requirement in argv[2:]:
        package, _, rest = requirement.partition("[")
        wanted = set(rest.rstrip("]").split(",")) if rest else set()
        if package == "tensorflow":
            assert wanted == {"and-cuda"}, requirement
        else:
            assert package == "." and wanted <= extras, requirement


def _shrink(argv):
    """`keras-vit train` and `export` with the README's flags, but little
    work: one short epoch; a verification on 8 images instead of 100 (at
    the README's 384 and 518 px, most of an export's time)."""
    smaller = {"train": (("--epochs", "1"), ("--batch-size", "4"))}
    out = list(argv)
    for flag, small in smaller.get(argv[1], ()):
        out[out.index(flag) + 1] = small
    if argv[1] == "export" and "--num-images" not in argv:
        out += ["--num-images", "8"]
    return out


def _run_shell(text, capsys, fetch=None):
    """Runs a shell block here; returns each `keras-vit` command's stdout."""
    printed = []
    for argv in _commands(text):
        if argv[0] == "pip":
            _check_pip(argv)
        elif argv[0] == "curl":
            fetch(argv)
        elif argv[:2] == ["mkdir", "-p"]:
            for folder in argv[2:]:
                os.makedirs(folder, exist_ok=True)
        elif argv[:2] == ["python", "-c"]:
            exec(compile(argv[2], README, "exec"), {})
        else:
            assert argv[0] == "keras-vit", argv
            argv = [
                match
                for arg in argv
                for match in (sorted(glob.glob(arg)) or [arg])
            ]
            capsys.readouterr()
            assert main(_shrink(argv)[1:]) == 0, argv
            printed.append(capsys.readouterr().out)
    return printed


@pytest.fixture
def tiny_releases(tmp_path, monkeypatch):
    """B/16 shrunk to a tiny ViT, and every preset "downloaded" as a tiny
    checkpoint in its release's format (`.npz`, the original layout) for
    that model, at the preset's resolution; an ImageNet-1k head favours
    class `FAVOURED`."""
    monkeypatch.setitem(registry.VARIANTS, "B/16", TINY_B16)
    monkeypatch.chdir(tmp_path)

    def download(preset, cache_dir=None):
        path = tmp_path / f"release-{preset['unique_name']}.npz"
        if not path.exists():
            classes = preset["num_classes"]
            model = keras_vit.ViT.from_variant(
                preset["variant"],
                image_size=preset["image_size"],
                num_classes=classes if classes <= 1000 else 7,
            )
            if classes == 1000:
                bias = np.zeros(1000, "float32")
                bias[FAVOURED] = 5.0
                model.get_layer("head").bias.assign(bias)
            keras_vit.weights.save_npz(model, str(path))
        return str(path)

    monkeypatch.setattr(keras_vit.weights.download, "download", download)
    return tmp_path


def _fetch_flowers(argv):
    """What the README's curl | tar gives: `flower_photos/<class>/*.jpg`
    (tiny here), and the licence file at its top."""
    from PIL import Image

    url = "https://storage.googleapis.com/download.tensorflow.org/"
    assert argv[:3] == ["curl", "-L", url + "example_images/flower_photos.tgz"]
    assert argv[3:] == ["|", "tar", "xz"], argv
    for name in ("daisy", "roses"):
        folder = os.path.join("flower_photos", name)
        os.makedirs(folder)
        for i, image in enumerate(random_images((5, 40, 48, 3))):
            Image.fromarray(image.astype("uint8")).save(
                os.path.join(folder, f"10{i}_{name}.jpg")
            )
    with open(os.path.join("flower_photos", "LICENSE.txt"), "w") as file:
        file.write("not an image\n")


# The README as a whole.


def test_the_readme_is_at_most_250_lines():
    assert _readme().count("\n") <= 250


def test_every_block_is_one_that_a_test_runs():
    blocks = _blocks()
    for language, text in blocks:
        owners = [
            name
            for name, (lang, containing) in BLOCKS.items()
            if lang == language and containing in text
        ]
        assert len(owners) == 1, (owners, text)
    assert len(blocks) == len(BLOCKS)


def test_shell_blocks_hold_no_optional_brackets():
    # `[--flag]` in a command does not paste; extras are quoted.
    for language, text in _blocks():
        if language != "sh":
            continue
        for argv in _commands(text):
            for arg in argv:
                if arg.startswith("[") or arg.endswith("]"):
                    assert argv[0] == "pip" and "[" in arg[1:], (arg, argv)


def test_pip_lines_install_this_checkout_and_its_extras():
    for language, text in _blocks():
        if language == "sh":
            for argv in _commands(text):
                if argv[0] == "pip":
                    _check_pip(argv)
    with pytest.raises(AssertionError):  # the check can fail
        _check_pip(["pip", "install", "keras-vit[onnx]"])
    with pytest.raises(AssertionError):  # not published yet
        _check_pip(["pip", "install", "keras-vision-transformer"])


def test_the_set_up_comes_first_and_ci_runs_its_test_command():
    # A newcomer on a fresh clone reads the set-up before anything else.
    language, text = _blocks()[0]
    assert (language, text) == ("sh", _block("set-up"))
    demo, test = _commands(text)
    assert (demo, test) == (["make", "demo"], ["make", "test"])
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as file:
        targets = re.findall(r"^(\w+):", file.read(), flags=re.M)
    assert {"demo", "test"} <= set(targets), targets
    # CI runs exactly the README's test command.
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as file:
        ci = _commands(file.read())
    assert ci[-1] == test, ci
    # The registry's name is what it will be, not the way in today.
    name, _ = _extras()
    readme = _readme()
    assert f"once released: `pip install {name}`" in readme


def test_the_presets_table_is_the_registrys():
    lines = registry.presets_table(num_classes=1000)
    readme = _readme().splitlines()
    start = readme.index(lines[0])
    assert readme[start : start + len(lines)] == lines
    after = readme[start + len(lines)]
    assert not after.startswith("|"), "a row the registry does not have"
    assert f"lists all {len(registry.PRESETS)}" in _readme()


def test_the_versions_it_states_are_the_distributions():
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as file:
        project = tomllib.load(file)["project"]
    pythons = [
        c.rsplit(" :: ", 1)[1]
        for c in project["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    floors = dict(
        re.fullmatch(r"([\w-]+)>=([\d.]+)", d).groups()
        for d in project["dependencies"]
    )
    stated = (
        f"Python\n{pythons[0]}–{pythons[-1]}, TensorFlow ≥ "
        f"{floors['tensorflow']},\nKeras ≥ {floors['keras']}."
    )
    assert project["requires-python"] == f">={pythons[0]}"
    assert stated.replace("\n", " ") in _readme().replace("\n", " ")


def test_every_preset_the_readme_names_exists():
    readme = _readme()
    unique = set(re.findall(r"\b(vit_\w+_in1k\w*|vit_\w+_in21k)\b", readme))
    assert {
        "vit_b16_augreg_in21k_ft_in1k",
        "vit_ti16_augreg_in21k_ft_in1k",
    } <= unique
    assert unique and all(registry.named_preset(n) for n in unique), unique
    for builder, short in re.findall(
        r"(ViT_\w+)\(weights=\"(\w+)\"", readme
    ) + re.findall(r"--model (ViT_\w+) --weights (\w+)", readme):
        variant = registry.BUILDERS[builder]
        assert registry.find_preset(variant, short), (builder, short)


def test_relative_links_lead_to_files():
    links = re.findall(r"\]\(([^)#:]+)\)", _readme())
    missing = [link for link in links if not os.path.exists(ROOT + "/" + link)]
    assert links and not missing, missing


def test_the_performance_table_is_its_results_files():
    readme = _readme()
    (results,) = re.findall(r"\]\((benchmarks/results/[^)]+\.md)\)", readme)
    with open(os.path.join(ROOT, results), encoding="utf-8") as file:
        recorded = file.read()
    section = readme[readme.index("## Performance") :]
    section = section[: section.index("\n## ")]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    # Each cell after the label: keras_vit's figure / timm's.
    cells = [cell.strip() for row in rows[1:] for cell in row.split("|")[2:-1]]
    pairs = [
        re.fullmatch(r"([\d,]+(?:\.\d+)?) / ([\d,]+(?:\.\d+)?)", c)
        for c in cells
    ]
    assert len(rows) == 7 and len(cells) == 24 and all(pairs), cells
    figures = [f for pair in pairs for f in pair.groups()]
    # Each as a whole number there, not a part of another ("1.34" of "11.34").
    missing = [
        f
        for f in figures
        if not re.search(rf"(?<![\d.,]){re.escape(f)}(?![\d,]*\d)", recorded)
    ]
    assert missing == []


# 1. Classify a photo.


def test_classifying_a_photo_in_python(tiny_releases, capsys):
    exec(compile(_block("classify in python"), README, "exec"), {})
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.endswith("%")]
    names = keras_vit.imagenet_class_names()
    assert len(names) == 1000 and len(lines) == 3
    assert names[:2] == ["tench", "goldfish"]  # as its comment says
    assert lines[0].startswith(f"{names[FAVOURED]}: ")


def test_classifying_a_photo_in_the_shell(tiny_releases, capsys):
    (printed,) = _run_shell(_block("classify in the shell"), capsys)
    assert os.path.isfile("cat.jpg")
    assert keras_vit.imagenet_class_names()[FAVOURED] in printed


# 2. Fine-tune, predict, export; 4. TFLite.


@pytest.mark.slow
def test_fine_tuning_then_predicting_and_exporting(tiny_releases, capsys):
    _run_shell(_block("fine-tune"), capsys, fetch=_fetch_flowers)
    config = keras_vit.training.config.load_config("runs/flowers/config.json")
    assert config.optimizer.name == "sgd" and config.optimizer.momentum == 0.9
    assert config.optimizer.weight_decay == 0.0
    model = keras.saving.load_model("runs/flowers/model.keras")
    assert model.output_shape == (None, 2)
    assert tuple(model.grid_size) == (24, 24)  # 384 px, resampled from 224
    assert os.path.isfile("serving/flowers/1/saved_model.pb")

    printed = _run_shell(_block("export"), capsys)
    assert os.path.isfile("flowers.tflite")
    metadata = keras_vit.export.read_metadata("flowers.tflite")
    assert metadata["class_names"] == ["daisy", "roses"]
    assert any(name in printed[-1] for name in ("daisy", "roses"))


# 5. A family's file to a phone.


@pytest.mark.slow
def test_a_hub_repo_to_a_verified_tflite(tmp_path, monkeypatch, capsys):
    """The README's id, served offline from a Hub cache in HF_HOME=tmp
    holding a tiny copy of the repo (tests/golden/hub/timm_dinov2_reg4)."""
    constants = pytest.importorskip("huggingface_hub.constants")
    cache = tmp_path / "hf" / "hub"
    root = cache / "models--timm--vit_small_patch14_reg4_dinov2.lvd142m"
    commit = "0" * 40
    shutil.copytree(
        os.path.join(ROOT, "tests", "golden", "hub", "timm_dinov2_reg4"),
        root / "snapshots" / commit,
    )
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.chdir(tmp_path)
    _run_shell(_block("family to tflite"), capsys)
    model = keras.saving.load_model("dinov2.keras")
    assert model.num_register_tokens == 4 and not model.include_top
    assert model.num_heads == 2 and model.image_size == (518, 518)
    metadata = keras_vit.export.read_metadata("dinov2.tflite")
    # The DINOv2 preset's normalisation, from the repo's pretrained_cfg.
    preset = registry.named_preset("vit_s14_dinov2_reg4_lvd142m_518")
    norm = metadata["input"]["normalization"]
    np.testing.assert_allclose(norm["mean"], preset["normalization"]["mean"])
    np.testing.assert_allclose(norm["std"], preset["normalization"]["std"])


# 3. At scale: what `auto` picks.


def test_the_at_scale_command_is_the_fine_tuning_one_with_a_bigger_batch():
    (install, command) = _commands(_block("at scale"))
    _check_pip(install)
    args = build_parser().parse_args(command[1:])
    assert (args.strategy, args.mixed_precision) == ("auto", "auto")
    assert (args.batch_size, args.learning_rate) == (512, 0.03)


def test_strategy_auto_picks_what_the_readme_says():
    from keras_vit.training.strategy import resolve_kind

    two_workers = '{"cluster": {"worker": ["a:1", "b:1"]}}'
    assert resolve_kind("auto", tpu="my-tpu", environ={}) == "tpu"
    assert resolve_kind("auto", environ={"TPU_NAME": "t"}) == "tpu"
    assert resolve_kind("auto", environ={"TF_CONFIG": two_workers}) == (
        "multi_worker"
    )
    assert resolve_kind("auto", environ={}, num_gpus=2) == "mirrored"
    assert resolve_kind("auto", environ={}, num_gpus=1) == "default"
    assert "`MultiWorkerMirroredStrategy` when\n  `TF_CONFIG`" in _readme()


def test_mixed_precision_auto_on_tpus_and_cpus_is_what_the_readme_says():
    from keras_vit.training.recipe import dtype_policy

    assert dtype_policy("auto", "tpu") == "mixed_bfloat16"
    assert dtype_policy("auto", "cpu", cpu_bfloat16=True) == "mixed_bfloat16"
    assert dtype_policy("auto", "cpu", cpu_bfloat16=False) == "float32"
    assert "bfloat16 on TPUs and on GPUs of compute" in _readme()


def test_mixed_precision_auto_on_gpus_is_what_the_readme_says():
    from keras_vit.training.recipe import dtype_policy

    for capability, policy in (
        ((8, 0), "mixed_bfloat16"),  # A100, and later
        ((9, 0), "mixed_bfloat16"),  # H100
        ((7, 5), "mixed_float16"),  # T4
        ((7, 0), "mixed_float16"),  # V100
    ):
        got = dtype_policy("auto", "gpu", gpu_capability=capability)
        assert got == policy, capability
