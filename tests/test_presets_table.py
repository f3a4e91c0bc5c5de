"""The presets' published accuracy (`top1`, `top1_source`) and the table
the README shows (`keras_vit.registry.presets_table`)."""

from keras_vit import registry
from keras_vit.registry import presets

GOOGLE = "google-research/vision_transformer README"
TIMM = "timm results-imagenet.csv (timm's evaluation of this checkpoint)"


def test_a_figure_comes_with_its_source_and_only_for_imagenet_1k_heads():
    for p in registry.PRESETS:
        assert (p["top1"] is None) == (p["top1_source"] is None), p
        if p["num_classes"] != 1000:  # ImageNet-21k heads: no 1k top-1
            assert p["top1"] is None, p["unique_name"]
        if p["top1"] is not None:
            assert 70.0 < p["top1"] < 90.0, p["unique_name"]
            assert p["top1_source"] in (GOOGLE, TIMM), p["unique_name"]


def test_figures_as_their_publishers_state_them():
    # Spot checks against the sources: Google's README (the AugReg table,
    # the 2020-10-29 changelog entry) and timm's results-imagenet.csv.
    expected = {
        "vit_ti16_augreg_in21k_ft_in1k_384": (78.22, GOOGLE),
        "vit_s16_augreg_in21k_ft_in1k_384": (83.73, GOOGLE),
        "vit_b16_in21k_ft_in1k": (81.2, GOOGLE),
        "vit_l16_in21k_ft_in1k": (82.7, GOOGLE),
        "vit_b16_augreg_in21k_ft_in1k": (84.534, TIMM),
        "vit_b16_augreg2_in21k_ft_in1k": (85.108, TIMM),
        "vit_b8_augreg2_in21k_ft_in1k": (86.252, TIMM),
        "vit_r50_l32_augreg_in21k_ft_in1k_384": (86.188, TIMM),
        "vit_b16_hf_in21k_ft_in1k": (None, None),  # its card states none
    }
    for name, (top1, source) in expected.items():
        p = registry.get_preset(name)
        assert (p["top1"], p["top1_source"]) == (top1, source), name


def test_the_table_has_a_row_per_preset_with_its_numbers():
    lines = presets.presets_table()
    assert lines[0] == "| " + " | ".join(presets.TABLE_HEADER) + " |"
    rows = lines[2:]
    assert len(rows) == len(registry.PRESETS)
    by_name = {row.split("`")[1]: row for row in rows}
    row = by_name["vit_b16_augreg_in21k_ft_in1k_384"]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:] == [
        "384 px",
        "86.9M",
        "347 MB",  # 86,859,496 parameters x 4 bytes
        "86.01% (timm)",
        "Apache-2.0",
    ]
    assert "| 78.22% (Google) |" in by_name["vit_ti16_augreg_in21k_ft_in1k_384"]
    assert "| — |" in by_name["vit_b16_augreg_in21k"]  # no 1k head


def test_the_table_can_hold_only_the_imagenet_1k_classifiers():
    rows = presets.presets_table(num_classes=1000)[2:]
    names = [row.split("`")[1] for row in rows]
    assert names == [
        p["unique_name"] for p in registry.PRESETS if p["num_classes"] == 1000
    ]
    assert "vit_b16_augreg_in21k" not in names and len(names) == 38
