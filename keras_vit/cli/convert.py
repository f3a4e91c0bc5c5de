"""`keras-vit convert`: a checkpoint in keras_vit's format."""

import sys

from keras_vit.cli import _arguments as arguments
from keras_vit.data.resize import INTERPOLATIONS
from keras_vit.options import ACTIVATIONS
from keras_vit.options import MODEL_POOLINGS
from keras_vit.options import MODEL_POSITION_EMBEDDINGS
from keras_vit.options import POSITION_EMBEDDING_TOKENS


def add_parser(sub):
    parser = sub.add_parser(
        "convert",
        help="convert a .npz / .safetensors checkpoint to keras_vit's format",
    )
    parser.add_argument(
        "input",
        help="a .npz or .safetensors checkpoint (configured by a "
        "config.json beside it), an hf://ORG/NAME[@REV] id or a Hub "
        "snapshot folder",
    )
    parser.add_argument(
        "--output", required=True, help="a .weights.h5 or .keras path"
    )
    parser.add_argument(
        "--model",
        default=None,
        help="builder name, e.g. ViT_B16 (default: from the checkpoint)",
    )
    parser.add_argument(
        "--num-heads",
        type=arguments.positive_int,
        default=None,
        help="for a ViT of another size than the released ones, in a format "
        "that does not record it (timm, Hugging Face .safetensors)",
    )
    parser.add_argument(
        "--source-grid",
        type=arguments.positive_int,
        nargs=2,
        default=None,
        metavar=("ROWS", "COLS"),
        help="the patch grid of the checkpoint's position embeddings, if "
        "not square (the formats record none; releases are square)",
    )
    parser.add_argument(
        "--position-embedding-tokens",
        choices=POSITION_EMBEDDING_TOKENS,
        default=None,
        help="whether the position embeddings have entries for the class, "
        "distillation and register tokens ('all') or the patches only, where "
        "their count does not say it (default: from the file)",
    )
    parser.add_argument(
        "--pooling",
        choices=MODEL_POOLINGS,
        default=None,
        help="how the tokens are pooled: a file with a class token and no "
        "fc_norm reads as 'token', and one trained with average pooling "
        "(timm's global_pool='avg', fc_norm=False) cannot say otherwise: "
        "give 'gap' for it (default: from the file)",
    )
    parser.add_argument(
        "--position-embedding",
        choices=MODEL_POSITION_EMBEDDINGS,
        default=None,
        help="the model's position embedding: a timm file with norm_pre, "
        "no patch-embedding bias and attention pooling is Perception "
        "Encoder core's ('rope') or a VisionTransformer's ('learned'), "
        "which its tensors cannot tell (default: from the file)",
    )
    _add_unrecorded(parser)
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing file at --output (never the input)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=run)


def _add_unrecorded(parser):
    """The flags of the model's arguments that no file records."""
    parser.add_argument(
        "--activation",
        choices=ACTIVATIONS,
        default=None,
        help="the MLP activation, which no file records: quick_gelu for "
        "OpenAI's CLIP (default: gelu; for a Hugging Face DINOv2, CLIP or "
        "SigLIP file, its family's: gelu, quick_gelu, gelu_tanh; silu for "
        "a gated (SwiGLU) MLP)",
    )
    parser.add_argument(
        "--layer-norm-epsilon",
        type=float,
        default=None,
        help="the LayerNorm epsilon, which no file records: 1e-5 for CLIP "
        "(default: 1e-6; for a Hugging Face CLIP file, 1e-5)",
    )
    parser.add_argument(
        "--rope-theta",
        type=float,
        default=None,
        help="the base of the rotary embedding's periods, which no file "
        "records (default: 100, DINOv3's, for a DINOv3 file)",
    )
    parser.add_argument(
        "--classifier-activation",
        default=None,
        metavar="NAME",
        help="the head's output activation: a Keras activation's name "
        "(softmax, sigmoid, ...) or 'none' for raw outputs (default: "
        "softmax; none for a Hugging Face CLIP file's image projection, "
        "whose outputs are embeddings)",
    )
    for name, imagenet in (("mean", "0.485 0.456 0.406"), ("std", None)):
        parser.add_argument(
            f"--{name}",
            type=float,
            nargs="+",
            default=None,
            metavar="V",
            help=(
                "with --std: the per-channel mean of [0, 1] pixels that the "
                f"checkpoint's inputs were normalised with ({imagenet} for "
                "DeiT and DINOv2), which no file records; the model then "
                "normalises [0, 255] pixels itself (default: to [-1, 1])"
                if imagenet
                else "with --mean: the per-channel std (0.229 0.224 0.225 "
                "for DeiT and DINOv2)"
            ),
        )
    _add_image_resize(parser)


def _add_image_resize(parser):
    """The flags of the model's `image_resize`, which no file records."""
    parser.add_argument(
        "--crop-pct",
        type=float,
        default=None,
        metavar="F",
        help="resize images for inference as timm evaluates: aspect ratio "
        "kept, the shorter side to size / F, the centre cut out (0.9 for "
        "timm's 224 px ViTs, DeiT, CLIP, SigLIP; 1.0 for DeiT III, DINOv2, "
        "384 px); default: the whole image squashed",
    )
    parser.add_argument(
        "--resize-interpolation",
        choices=INTERPOLATIONS,
        default=None,
        help="the interpolation of the resizing (default: bicubic with "
        "--crop-pct, as timm's; else bilinear)",
    )


def _report(message):
    """Shows what the converted model assumed, before the user trusts it."""
    print(
        f"keras-vit convert: {message}\n  (flags: --num-heads, --activation, "
        "--layer-norm-epsilon, --rope-theta, --mean/--std)",
        file=sys.stderr,
    )


def run(args):
    from keras_vit.weights.convert import convert

    unrecorded = {
        name: value
        for name in ("activation", "layer_norm_epsilon", "rope_theta")
        if (value := getattr(args, name)) is not None
    }
    if args.classifier_activation is not None:  # checked by keras_vit.ViT
        name = args.classifier_activation
        unrecorded["classifier_activation"] = None if name == "none" else name
    if (args.mean is None) != (args.std is None):
        raise ValueError(
            "--mean and --std go together. Received: "
            f"mean={args.mean} and std={args.std}"
        )
    for name in ("pooling", "position_embedding"):
        if getattr(args, name) is not None:
            unrecorded[name] = getattr(args, name)
    if args.mean is not None:
        unrecorded["normalization"] = {"mean": args.mean, "std": args.std}
    interpolation = args.resize_interpolation
    if interpolation is None and args.crop_pct is not None:
        interpolation = "bicubic"  # timm's crop
    image_resize = {
        key: value
        for key, value in (
            ("crop_pct", args.crop_pct),
            ("interpolation", interpolation),
        )
        if value is not None
    }
    if image_resize:  # checked by keras_vit.ViT
        unrecorded["image_resize"] = image_resize
    model = convert(
        args.input,
        args.output,
        model=args.model,
        num_heads=args.num_heads,
        source_grid=args.source_grid,
        position_embedding_tokens=args.position_embedding_tokens,
        overwrite=args.overwrite,
        verbose=0 if args.quiet else "auto",
        report=_report,
        **unrecorded,
    )
    print(
        f"{args.input} -> {args.output}: {model.name}, "
        f"{model.count_params():,} parameters, image_size {model.image_size}, "
        f"{model.num_classes if model.include_top else 'no'} classes"
    )
