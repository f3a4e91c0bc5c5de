"""`keras-vit models`: the model builders and their sizes."""

from keras_vit.cli._table import print_table


def add_parser(sub):
    parser = sub.add_parser("models", help="list the model builders")
    parser.set_defaults(run=run)


def run(args):
    import keras

    from keras_vit import builders
    from keras_vit.registry import variants

    header = ("builder", "variant", "width", "depth", "heads", "mlp", "params")
    rows = []
    for builder, variant in builders.BUILDERS.items():
        # Count parameters from the variables' shapes without allocating
        # them (ViT-H/14 alone would take 2.5 GB).
        with keras.StatelessScope(initialize_variables=False):
            params = builders.get_builder(builder)().count_params()
        v = variants.get_variant(variant)
        rows.append(
            (
                builder,
                variant,
                v["hidden_dim"],
                v["num_layers"],
                v["num_heads"],
                v["mlp_dim"],
                f"{params:,}",
            )
        )
    print_table(header, rows)
    print("Parameter counts: 224 x 224 input, 1000-class head.")
