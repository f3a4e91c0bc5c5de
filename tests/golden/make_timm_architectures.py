"""Writes keras_vit/weights/timm_architectures.json: the `model_args` of
each timm ViT architecture that keras_vit builds, as timm's own entry
points pass them (captured by calling each registered entry point of
`timm.models.vision_transformer` with `_create_vision_transformer`
replaced, so nothing is built or downloaded).

A Hub repo's `config.json` names its `architecture` and writes only the
`model_args` it changed; the architecture's own arguments come from here.
Kept: those whose every argument keras_vit has (LayerNorm, GELU / quick
GELU / tanh GELU, token / avg / map pooling); dropped: SwiGLU, RMSNorm,
parallel blocks, no final norm, and the like.

Also timm's DeiT architectures (`timm.models.deit`, captured from
`_create_deit` alike): DeiT, DeiT distilled (`distilled=True`, timm's
`VisionTransformerDistilled`: a distillation token and a second head) and
DeiT III (`no_embed_class`, LayerScale `init_values`).

And timm's DINOv3 and EUPE ViTs (`vit_*_patch16_dinov3*`, the `Eva`
class of `timm.models.eva`, captured from `_create_eva` alike), in
`Eva`'s own argument names, the SwiGLU S+ and H+ (`swiglu_mlp`,
`swiglu_align_to`) with them, not the 7B (its other arguments): their
`global_pool` is set to "token", the class token as Meta's DINOv3
and keras_vit's DINOv3 presets pool, where timm's `Eva` averages. And
Perception Encoder core (`vit_pe_core_*`) and Naver's RoPE-ViT
(`vit_*_patch16_rope_224`, `..._rope_*_224`), `Eva` too, as their entry
points pass their arguments (`Eva`'s defaults for the others:
`keras_vit.weights.hub_config.EVA_DEFAULTS`).

Run with the reference environment (timm 1.0.31):
    /work/ref-venv/bin/python tests/golden/make_timm_architectures.py
"""

import json
import pathlib
import re

import timm
import timm.models.deit as deit
import timm.models.eva as eva
import timm.models.vision_transformer as vision_transformer

OUTPUT = (
    pathlib.Path(__file__).resolve().parents[2]
    / "keras_vit/weights/timm_architectures.json"
)
KEPT = {
    "patch_size", "embed_dim", "depth", "num_heads", "mlp_ratio",
    "init_values", "reg_tokens", "no_embed_class", "class_token",
    "global_pool", "pre_norm", "norm_layer", "act_layer", "img_size",
    "fc_norm", "dynamic_img_size", "qk_norm", "qkv_bias", "distilled",
}  # fmt: skip
#: `Eva`'s arguments in its DINOv3 entry points that keras_vit builds.
EVA_KEPT = {
    "patch_size", "embed_dim", "depth", "num_heads", "qkv_bias",
    "init_values", "rope_type", "rope_temperature", "rope_rotate_half",
    "use_rot_pos_emb", "use_abs_pos_emb", "num_reg_tokens", "use_fc_norm",
    "norm_layer", "dynamic_img_size", "swiglu_mlp", "swiglu_align_to",
}  # fmt: skip
#: And in the Perception Encoder core and Naver RoPE-ViT entry points.
ROPE_KEPT = EVA_KEPT | {
    "mlp_ratio", "global_pool", "attn_type", "use_pre_transformer_norm",
    "ref_feat_shape", "rope_grid_offset", "rope_grid_indexing",
    "attn_pool_num_heads", "attn_pool_mlp_ratio", "class_token",
    "no_embed_class", "use_fc_norm",
}  # fmt: skip
ROPE_FAMILIES = (
    "vit_pe_core_*",
    "vit_*_patch16_rope_224",
    "vit_*_patch16_rope_*_224",
)


class _Captured(Exception):
    pass


def _capture(
    name, module=vision_transformer, factory="_create_vision_transformer"
):
    captured = {}

    def create(variant, pretrained=False, **kwargs):
        captured.update(kwargs)
        raise _Captured

    setattr(module, factory, create)
    try:
        timm.models.model_entrypoint(name)()
    except _Captured:
        return captured
    return None


def _kept(args, kept=KEPT):
    if args is None or set(args) - kept:
        return None
    args = dict(args)
    args.pop("dynamic_img_size", None)
    norm = args.pop("norm_layer", None)
    if norm is not None:
        text = repr(norm)
        if "LayerNorm" not in text:
            return None
        args["norm_eps"] = float(re.search(r"eps=([0-9.e-]+)", text)[1])
    if args.get("act_layer", "gelu") not in ("gelu", "quick_gelu", "gelu_tanh"):
        return None
    if args.get("global_pool", "token") not in ("token", "avg", "map"):
        return None
    return args


def main():
    table = {}
    for name in timm.list_models(module="vision_transformer"):
        args = _kept(_capture(name)) if name.startswith("vit_") else None
        if args is not None and "patch_size" in args:
            table[name] = args
    for name in timm.list_models(module="deit"):
        args = _kept(_capture(name, deit, "_create_deit"))
        if args is not None:
            table[name] = args
    for name in timm.list_models("vit_*_patch16_dinov3*", module="eva"):
        args = _kept(_capture(name, eva, "_create_eva"), EVA_KEPT)
        if args is not None:
            table[name] = {**args, "global_pool": "token"}
    for name in timm.list_models(ROPE_FAMILIES, module="eva"):
        args = _kept(_capture(name, eva, "_create_eva"), ROPE_KEPT)
        if args is not None:
            table[name] = args
    lines = [f"  {json.dumps(n)}: {json.dumps(a)}" for n, a in table.items()]
    OUTPUT.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    print(f"{len(table)} architectures -> {OUTPUT}")


if __name__ == "__main__":
    main()
