"""`keras-vit export`, `verify` and `benchmark-export`: wired from
`keras_vit.export.cli`, which defines and runs them."""


def add_parsers(sub):
    from keras_vit.export import cli as export_cli

    export_cli.add_commands(sub)  # export, verify, benchmark-export
