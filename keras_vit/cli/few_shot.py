"""`keras-vit few-shot`: the paper's linear few-shot evaluation."""

from keras_vit import model_argument
from keras_vit.cli import _arguments as arguments
from keras_vit.options import FEW_SHOT_L2_REG
from keras_vit.options import FEW_SHOT_SEEDS
from keras_vit.options import FEW_SHOT_SHOTS


def add_parser(sub):
    parser = sub.add_parser(
        "few-shot",
        help="the paper's linear few-shot accuracy of a model's representation",
        description="Linear few-shot evaluation (arXiv 2010.11929, Sec. 4.1): "
        "regularised least squares from the frozen representation "
        "of k training images per class to {-1, 1}^K, accuracy on "
        "the test split; big_vision's settings (see "
        "keras_vit.evaluation).",
    )
    parser.add_argument("model", help=model_argument.MODEL_HELP)
    parser.add_argument(
        "--dataset",
        required=True,
        help="digits, fashion_mnist, folder:PATH or a tensorflow_datasets name",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="tensorflow_datasets folder (a tensorflow_datasets name only)",
    )
    parser.add_argument(
        "--shots",
        type=arguments.positive_int,
        nargs="+",
        default=list(FEW_SHOT_SHOTS),
        help="examples per class (default "
        + " ".join(map(str, FEW_SHOT_SHOTS))
        + ")",
    )
    parser.add_argument(
        "--seeds",
        type=arguments.positive_int,
        default=FEW_SHOT_SEEDS,
        help=f"random draws (default {FEW_SHOT_SEEDS})",
    )
    parser.add_argument(
        "--l2-reg",
        type=float,
        default=FEW_SHOT_L2_REG,
        help=f"L2 penalty (default {FEW_SHOT_L2_REG:g}, big_vision's)",
    )
    parser.add_argument(
        "--weights",
        default=None,
        help="preset or checkpoint, with a builder name (without it a "
        "builder name's weights are random: an untrained baseline, which "
        "the output says)",
    )
    parser.add_argument(
        "--image-size", type=arguments.positive_int, default=None
    )
    parser.add_argument("--batch-size", type=arguments.positive_int, default=64)
    parser.add_argument(
        "--test-fraction",
        type=arguments.fraction,
        default=None,
        help="for a dataset without a test split (an image folder): "
        "the share of its images held out to test on",
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar while the features are computed",
    )
    parser.set_defaults(run=run)


def run(args):
    from keras_vit import evaluation
    from keras_vit import resolver
    from keras_vit.data import datasets
    from keras_vit.export.loaded_model import inference_model

    # Before the model is loaded (a preset's weights downloaded).
    datasets.check_data_dir(args.dataset, args.data_dir)
    source = resolver.locate(args.model, args.weights)
    # Said as the table's first line (an error stays the only line on
    # stderr).
    untrained = evaluation.random_weights(args.model, args.weights)
    model = inference_model(source, args.weights, args.image_size)
    result = evaluation.few_shot(
        model,
        args.dataset,
        shots=args.shots,
        seeds=args.seeds,
        l2_reg=args.l2_reg,
        data_dir=args.data_dir,
        batch_size=args.batch_size,
        test_fraction=args.test_fraction,
        verbose=0 if args.quiet else "auto",
    )
    result.untrained = untrained
    print(result.summary())
