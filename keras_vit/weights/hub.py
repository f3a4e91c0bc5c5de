"""Hub repos as weights: an `hf://ORG/NAME[@REVISION]` id, fetched with
`huggingface_hub` (its shared cache `models--ORG--NAME/snapshots/COMMIT/`,
`HF_HUB_OFFLINE`, `HF_ENDPOINT`, `HF_TOKEN`), or a snapshot folder on disk
(`config.json` and `model.safetensors`, with `preprocessor_config.json`
where the publisher ships one).

`snapshot(source)` turns either into the local folder; `arguments` merges
the folder's configuration (`keras_vit.weights.hub_config`) with the
caller's `ViT` arguments, refusing by name an argument that contradicts
the files in a way that changes the answer.
"""

import functools
import os

from keras_vit import extras
from keras_vit.model_argument import RUN_MODEL_FILE
from keras_vit.weights import hub_config
from keras_vit.weights import reader

PREFIX = "hf://"
WEIGHTS_FILE = "model.safetensors"
#: A large model's weights in shards, named by this index.
SHARD_INDEX_FILE = "model" + reader.SHARD_INDEX


def is_source(source):
    """Whether `source` is an `hf://` id or a snapshot folder: a folder
    holding a `config.json` and no `model.keras` (a training run's folder
    holds both)."""
    if not isinstance(source, (str, os.PathLike)):
        return False
    text = os.fspath(source)
    return text.startswith(PREFIX) or (
        os.path.isfile(os.path.join(text, hub_config.CONFIG_FILE))
        and not os.path.exists(os.path.join(text, RUN_MODEL_FILE))
    )


def snapshot(source):
    """The local snapshot folder of `source` (`is_source`), fetching an
    `hf://` id's files into the Hub cache (only what `read` and the
    weights need); `None` for anything else.

    Raises:
        ValueError: naming the id, for a malformed id, a repo, revision or
            file the Hub (or, offline, its cache) does not have, or a repo
            without `model.safetensors`.
        keras_vit.extras.MissingExtraError: without `huggingface_hub`.
    """
    if not is_source(source):
        return None
    text = os.fspath(source)
    if not text.startswith(PREFIX):
        weights_file(text)
        return text
    repo, revision = _parse(text)
    feature = f"Loading {text}"
    client = tuple(
        extras.require(f"huggingface_hub{part}", feature)
        for part in ("", ".errors", ".constants")
    )
    fetch = functools.partial(_fetch, client, text, repo, revision)
    folder = os.path.dirname(fetch(hub_config.CONFIG_FILE, required=True))
    if hub_config.is_transformers(hub_config.load(folder)):
        fetch(hub_config.PREPROCESSOR_FILE, required=False)
    index = _weights(fetch)
    if index is not None:
        for name in reader.shard_names(index):
            fetch(name, required=True)
    return folder


def _weights(fetch):
    """Fetches the repo's `model.safetensors`, else its shards' index
    (returned, `None` for the former): a whole file the cache cannot
    vouch for, the Hub out of reach, is refused only once the index is
    not cached either."""
    refusal = None
    for name in (WEIGHTS_FILE, SHARD_INDEX_FILE):
        try:
            path = fetch(name, required=False)
        except _Uncached as error:
            refusal = refusal or error
            continue
        if path is not None:
            return None if name == WEIGHTS_FILE else path
    if refusal is not None:
        raise refusal
    return fetch(WEIGHTS_FILE, required=True)  # raises, naming it


class _Uncached(ValueError):
    """A file the cache lacks, where neither the Hub (out of reach or
    `HF_HUB_OFFLINE`) nor the cache's record of the Hub's 404s says the
    repo lacks it."""


def _parse(text):
    """`hf://ORG/NAME[@REVISION]` -> `("ORG/NAME", REVISION or None)`."""
    repo, _, revision = text[len(PREFIX) :].partition("@")
    parts = repo.split("/")
    if len(parts) != 2 or not all(parts) or (_ and not revision):
        raise ValueError(
            "A Hub id is hf://ORG/NAME or hf://ORG/NAME@REVISION. "
            f"Received: {text!r}"
        )
    return repo, revision or None


def _fetch(client, text, repo, revision, name, required):
    """One file of the repo, from the cache or the Hub (`client`: the
    `huggingface_hub` module, its `errors` and `constants`); `None` for a
    file that is not `required` and that the Hub says the repo lacks, now
    or, the Hub out of reach, as the cache recorded its 404. Any other
    file the cache lacks is refused, required or not: a repo's processor
    config left out would change the model's input."""
    hub, errors, constants = client
    try:
        return hub.hf_hub_download(repo, name, revision=revision)
    except errors.GatedRepoError as error:
        raise ValueError(
            f"{text} is gated: accept its terms on the Hub and set HF_TOKEN "
            f"({_first_line(error)})"
        ) from None
    except (errors.RepositoryNotFoundError, errors.RevisionNotFoundError):
        raise ValueError(
            f"The Hub has no repo or revision {text} (or it is private: set "
            "HF_TOKEN)."
        ) from None
    except errors.LocalEntryNotFoundError as error:  # not in the cache
        cached = hub.try_to_load_from_cache(repo, name, revision=revision)
        if not required and cached is hub._CACHED_NO_EXIST:
            return None
        if not constants.HF_HUB_OFFLINE:  # and the Hub not reached
            reason = _first_line(error.__cause__ or error)
            raise _Uncached(
                f"Cannot reach the Hub for {name} of {text}, and its cache "
                f"does not hold it ({reason}). Set HF_HUB_OFFLINE=1 to load "
                "what the cache holds."
            ) from None
        raise _Uncached(_missing(text, name, offline=True)) from None
    except errors.EntryNotFoundError:  # (after Local-, its subclass)
        if not required:
            return None
        raise ValueError(_missing(text, name, offline=False)) from None
    except Exception as error:  # noqa: BLE001 - the client's HTTP library (httpx) raises its own transport errors
        raise ValueError(
            f"Cannot fetch {name} of {text}: {_first_line(error)}"
        ) from None


#: Why a repo without one of these files is not read by id.
_WHY_MISSING = {
    hub_config.CONFIG_FILE: (
        "keras_vit builds a repo by id from the config.json that timm and "
        "transformers write"
    ),
    WEIGHTS_FILE: (
        f"nor {SHARD_INDEX_FILE}: keras_vit reads a repo's safetensors "
        "only; one with only pytorch_model.bin is refused, nothing is "
        "unpickled"
    ),
}
#: What a repo of Google (big_vision, google-research) `.npz` files, which
#: carry no config, is loaded as instead.
_NPZ_HINT = (
    "; a repo of Google .npz checkpoints loads as a file: fetch it "
    "(huggingface_hub.hf_hub_download) and pass its path as the model "
    "(keras-vit convert FILE.npz, any MODEL argument): its tensors give "
    "the architecture"
)


def _missing(text, name, offline):
    where = "the Hub cache (HF_HUB_OFFLINE is set)" if offline else text
    message = f"{where} has no {name} for {text}"
    if name in _WHY_MISSING:
        message += f" ({_WHY_MISSING[name]}{_NPZ_HINT})"
    return message + "."


def _first_line(error):
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def configured(path):
    """The snapshot folder and weights file of `path`: an `hf://` id or
    snapshot folder (`snapshot`; its `model.safetensors`), or a
    `.safetensors` file with a `config.json` beside it (that file);
    `(None, None)` for anything else."""
    folder = snapshot(path)
    if folder is not None:
        return folder, weights_file(folder)
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else ""
    beside = os.path.dirname(text) or "."
    if text.endswith(".safetensors") and is_source(beside):
        return beside, text
    return None, None


def weights_file(folder):
    """The snapshot `folder`'s `model.safetensors`, else its shards'
    index, or `ValueError`."""
    for name in (WEIGHTS_FILE, SHARD_INDEX_FILE):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    raise ValueError(
        f"The snapshot folder has neither {WEIGHTS_FILE} nor "
        f"{SHARD_INDEX_FILE} (keras_vit reads safetensors only: "
        f"pytorch_model.bin is never unpickled). Received: {folder!r}"
    )


def arguments(config, given):
    """The `ViT` arguments of `config` (a `hub_config.HubConfig`) with
    `given` over them.

    `given` may change the resolution, the head (`fill_head` then drops
    class names that no longer name it), `normalization`,
    `image_resize` and anything the files do not set; an argument of
    `hub_config.FIXED` that differs from the files' is refused.

    Raises:
        ValueError: naming the argument, its value and the files'.
    """
    own = dict(config.arguments)
    for name in hub_config.FIXED:
        if name in given and name in own and given[name] != own[name]:
            raise ValueError(
                f"`{name}` contradicts the {config.source} config of "
                f"{config.name!r} ({name}={own[name]!r}), which the weights "
                f"were trained with. Received: {name}={given[name]!r}"
            )
    if "num_classes" in given and "include_top" not in given:
        own["include_top"] = True
    return {**own, **given}


def fill_head(given, checkpoint, user):
    """Fills in `given` the head of a snapshot whose config does not say
    whether the file has one (transformers': `CLIPVisionModel` or
    `CLIPModel`): the checkpoint's, with its layout's classifier
    activation (a CLIP projection gives embeddings). Then drops the
    files' class names (not those in `user`, the caller's arguments)
    where they do not name the head's outputs: no head, or a new head of
    the caller's `num_classes` (`refuse_misfit` refused names that name
    no head of the file)."""
    if "include_top" not in given:
        given["include_top"] = checkpoint.num_classes is not None
        if checkpoint.num_classes is not None:
            given.setdefault("num_classes", checkpoint.num_classes)
        if "classifier_activation" in checkpoint.layout_defaults:
            given.setdefault(
                "classifier_activation",
                checkpoint.layout_defaults["classifier_activation"],
            )
    names = given.get("class_names")
    if (
        names is not None
        and "class_names" not in user
        and (not given["include_top"] or len(names) != given.get("num_classes"))
    ):
        del given["class_names"]


#: The sizes a Hub config gives and its weights file holds.
_SIZES = ("hidden_dim", "num_layers", "mlp_dim")


def refuse_misfit(given, user, checkpoint):
    """Raises, before a model is built, where a Hub repo's config (in
    `given`, the arguments with the caller's, `user`, over it) and its
    weights (`checkpoint`) disagree on a size, or, unless the caller
    chose the head (`num_classes`), on the class count of the head the
    file has or on the count of the config's class names (timm's
    `label_names`, transformers' `id2label`; a config's head over a file
    without one: its count): built from the config, the
    model would not load, or would put the config's class names on a
    new, zero head; and a huge number in a config would be allocated
    before the weights refused it. (A config with a head over a file
    without one gets a new head, with a warning, as in timm.)"""
    found = {name: getattr(checkpoint, name) for name in _SIZES}
    if "num_classes" not in user and given.get("include_top"):
        found["num_classes"] = checkpoint.num_classes
    for name, value in found.items():
        if value is not None and given.get(name) != value:
            raise ValueError(
                f"The repo's config.json contradicts its weights "
                f"{checkpoint.path}: the config gives {name}="
                f"{given.get(name)!r}, the weights {name}={value!r}; "
                f"nothing was built. Received: {name}={given.get(name)!r}"
            )
    names = given.get("class_names")
    # The files' head: the weights', else the config's (a new head).
    head = checkpoint.num_classes or given.get("num_classes")
    if (
        names is not None
        and not {"class_names", "num_classes"} & set(user)
        and given.get("include_top") is not False
        and len(names) != head
    ):
        raise ValueError(
            f"The repo's config.json names {len(names)} classes, but the "
            f"head of its files {checkpoint.path} has {head or 'no'} "
            "outputs; nothing was built. Pass num_classes (a new head) or "
            f"include_top=False. Received: {len(names)} class names"
        )
