"""`keras-vit presets`: the pretrained weights."""

from keras_vit.cli._table import print_table


def add_parser(sub):
    parser = sub.add_parser("presets", help="list the pretrained weights")
    parser.add_argument(
        "--model",
        default=None,
        help="builder, variant or a preset's unique name",
    )
    parser.set_defaults(run=run)


def run(args):
    from keras_vit.data import resize
    from keras_vit.registry import list_presets

    header = (
        "builder",
        "preset",
        "unique_name",
        "res",
        "classes",
        "pre-logits",
        "source",
        "resize",
    )
    rows = [
        (
            p["builder"] or "-",  # S/14 has none
            p["name"],
            p["unique_name"],
            p["image_size"],
            p["num_classes"] or "-",
            p["representation_size"] or "-",
            p["source"],
            resize.describe(p["image_resize"]),
        )
        for p in list_presets(args.model)
    ]
    print_table(header, rows)
    print(
        "Use: keras_vit.ViT_B16(weights='<preset>'), or the unique name "
        "anywhere a model is named; downloads are cached."
    )
