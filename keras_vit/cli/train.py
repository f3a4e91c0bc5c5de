"""`keras-vit train`: `keras_vit.training.train` from the command line.

Its flags are made from the fields of `TrainConfig`'s sections
(`keras_vit.training.config.settings`), one flag per field, named by its
flat name (`--epochs` sets `run.epochs`), or per entry of a dict field
(`--hidden-dim` sets `model.kwargs["hidden_dim"]`), with the field's
default, choices and help: nothing here restates them.

`--recipe` starts from a named recipe (`keras_vit.training.config.RECIPES`:
`pretrain`, the fields' defaults, or `fine-tune`, the paper's fine-tuning
recipe) instead of the defaults; the flags given set fields over it.
"""

import argparse

from keras_vit.training.config import RECIPES
from keras_vit.training.config import TrainConfig
from keras_vit.training.config import settings

#: The namespace attribute that holds the destinations of the flags given
#: on the command line (`_Given`), which override a `--recipe`'s values.
GIVEN = "given_flags"


class _Given(argparse.Action):
    """Stores a flag's value (`nargs=0`: its `const`) and notes that it was
    given, so that a recipe's value gives way to it, and only to it (a
    flag given with its default's value is given all the same)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)
        given = set(getattr(namespace, GIVEN, None) or ())
        setattr(namespace, GIVEN, given | {self.dest})


#: What an "on" / "off" or "auto" / "on" / "off" flag means.
_TEXT = {"on": True, "off": False, "auto": "auto"}


def _flag(name):
    return "--" + name.replace("_", "-")


def _text(value):
    """A choice as the command line spells it (`True` -> `"on"`)."""
    if value is True or value is False:
        return "on" if value else "off"
    return str(value)


def _add_field(parser, field):
    meta = field.metadata
    kind = meta["kind"]
    default = field.default
    extra = {"help": meta["help"]} if meta["help"] else {}
    if meta["required"]:
        extra["required"] = True
    elif kind not in ("options", "store_true") and default is not None:
        if "default:" not in (meta["help"] or ""):
            shown = default[0] if kind == "crop_area" else default
            note = f"default: {_text(shown)}"
            extra["help"] = (
                f"{extra['help']} ({note})" if "help" in extra else note
            )
    if kind == "options":
        for flag, _, type_, choices, help_ in meta["options"]:
            parser.add_argument(
                _flag(flag),
                type=type_,
                choices=choices,
                default=None,
                help=help_,
                dest=flag,
                metavar=None if choices else flag.upper(),
                action=_Given,
            )
        return
    if kind == "store_true":
        parser.add_argument(
            _flag(field.flat),
            action=_Given,
            nargs=0,
            const=True,
            default=False,
            **extra,
        )
        return
    if kind in ("switch", "choice_text", "dashes"):
        choices = meta["choices"] or (True, False)
        spell = (lambda c: c.replace("_", "-")) if kind == "dashes" else _text
        parser.add_argument(
            _flag(field.flat),
            choices=[spell(c) for c in choices],
            default=spell(default),
            action=_Given,
            **extra,
        )
        return
    if kind == "crop_area":
        parser.add_argument(
            "--crop-min-area",
            type=float,
            default=default[0],
            dest=field.flat,
            metavar="CROP_MIN_AREA",
            action=_Given,
            **extra,
        )
        return
    type_ = meta["type"] or field.type
    parser.add_argument(
        _flag(field.flat),
        type=type_ if type_ is not str else None,
        choices=meta["choices"],
        default=default,
        action=_Given,
        **extra,
    )


def _recipe_help():
    """`--recipe`'s help: what each recipe sets, as the flags spell it."""
    flats = {(f.section, f.name): f for f in settings()}
    parts = []
    for name, sections in RECIPES.items():
        flags = [
            f"{_flag(flats[section, field].flat)} {_text(value)}"
            for section, fields in sections.items()
            for field, value in fields.items()
            if value is not None
        ]
        spelled = name.replace("_", "-")
        parts.append(
            f"{spelled}: {' '.join(flags)}"
            if flags
            else f"{spelled}: the defaults"
        )
    return (
        "start from a named recipe, the flags given override it ("
        + "; ".join(parts)
        + "; fine-tune is the paper's fine-tuning recipe, with the batch, "
        "learning rate and epochs chosen for small data: see "
        "keras_vit.training.config.RECIPES) (default: pretrain)"
    )


def add_parser(sub):
    parser = sub.add_parser(
        "train", help="train a ViT (any tf.distribute strategy)"
    )
    parser.add_argument(
        "--recipe",
        choices=[name.replace("_", "-") for name in RECIPES],
        default="pretrain",
        help=_recipe_help(),
    )
    for field in settings():
        _add_field(parser, field)
    parser.set_defaults(run=run)


def _value(field, args):
    """The value of `field` that the parsed `args` give."""
    meta = field.metadata
    kind = meta["kind"]
    if kind == "options":
        return {
            key: getattr(args, flag)
            for flag, key, *_ in meta["options"]
            if getattr(args, flag) is not None
        }
    value = getattr(args, field.flat)
    if kind in ("switch", "choice_text"):
        by_text = {_text(c): c for c in (meta["choices"] or (True, False))}
        return by_text[value]
    if kind == "dashes":
        return value.replace("-", "_")
    if kind == "crop_area":
        return (value, 1.0)
    return value


def _given(field, args):
    """Whether a flag of `field` was given on the command line."""
    given = getattr(args, GIVEN, None) or set()
    if field.metadata["kind"] == "options":
        return any(flag in given for flag, *_ in field.metadata["options"])
    return field.flat in given


def config_from_args(args):
    """The `TrainConfig` that `keras-vit train`'s parsed `args` ask for: the
    `--recipe`'s fields, and every other field from its flag (given, or
    its default)."""
    recipe = getattr(args, "recipe", "pretrain").replace("-", "_")
    sections = {}
    for field in settings():
        if field.name in RECIPES[recipe].get(field.section, {}) and not (
            _given(field, args)
        ):
            continue  # the recipe's
        sections.setdefault(field.section, {})[field.name] = _value(field, args)
    return TrainConfig.from_recipe(recipe, **sections)


def run(args):
    from keras_vit.training import train

    result = train(config_from_args(args))
    for key, value in result.test_metrics.items():
        print(f"test {key}: {value:.4f}")
    print(f"outputs in {result.output}")
