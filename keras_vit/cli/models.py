"""`keras-vit models`: the model builders and their sizes (from the
registry's data: no model is built, nothing heavy is imported)."""

from keras_vit.cli._table import print_table


def add_parser(sub):
    parser = sub.add_parser("models", help="list the model builders")
    parser.set_defaults(run=run)


def run(args):
    from keras_vit.registry import variants

    header = ("builder", "variant", "width", "depth", "heads", "mlp", "params")
    rows = []
    for builder, variant in variants.BUILDERS.items():
        v = variants.get_variant(variant)
        rows.append(
            (
                builder,
                variant,
                v["hidden_dim"],
                v["num_layers"],
                v["num_heads"],
                v["mlp_dim"],
                f"{variants.PARAMS[builder]:,}",
            )
        )
    print_table(header, rows)
    print("Parameter counts: 224 x 224 input, 1000-class head.")
