"""Make keras_vit/data/imagenet_class_names.txt: ImageNet-1k's 1000 classes.

DEVELOPER-SIDE ONLY; not run by the test suite. Each line is a class's
WordNet id and its name, in ILSVRC-2012 order (the sorted WordNet ids, the
order of the ImageNet-1k presets' outputs and of Keras's
`decode_predictions`); the name is the synset's first WordNet lemma
(`tench`, `goldfish`, `great_white_shark`). Two pairs of classes share a
first lemma (`crane` the bird and the machine, `maillot` twice), as in
Keras's class index.

Inputs, both offline: the 1000 ids from tensorflow-datasets' ImageNet 2012
label file (the `train` extra installs it), and the lemmas from WordNet 3.0
as Debian ships it (`apt-get install wordnet-base`: data.noun, whose lines
begin with the synset's offset, the id's digits). Run from the repository
root:

    python tests/golden/make_imagenet_class_names.py [/usr/share/wordnet]

Last run with tensorflow-datasets 4.9 and Debian's wordnet-base 3.0.
"""

import importlib.resources
import os
import sys

OUTPUT = os.path.join(
    os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ),
    "keras_vit",
    "data",
    "imagenet_class_names.txt",
)


def wordnet_ids():
    labels = importlib.resources.files("tensorflow_datasets").joinpath(
        "datasets/imagenet2012/labels.txt"
    )
    ids = labels.read_text().split()
    if len(ids) != 1000 or len(set(ids)) != 1000:
        raise ValueError(f"Expected 1000 distinct ids. Received: {len(ids)}")
    return sorted(ids)


def first_lemmas(wordnet, ids):
    wanted = {i[1:]: i for i in ids}
    names = {}
    with open(os.path.join(wordnet, "data.noun"), encoding="latin-1") as f:
        for line in f:
            fields = line.split(" ", 5)
            if fields[0] in wanted:
                # offset lex_filenum ss_type w_cnt word lex_id ...
                names[wanted[fields[0]]] = fields[4]
    missing = sorted(set(ids) - set(names))
    if missing:
        raise ValueError(f"Ids not in WordNet: {missing[:5]}")
    return names


def main(wordnet="/usr/share/wordnet"):
    ids = wordnet_ids()
    names = first_lemmas(wordnet, ids)
    with open(OUTPUT, "w", encoding="utf-8") as f:
        f.writelines(f"{i} {names[i]}\n" for i in ids)
    print(f"wrote {len(ids)} classes to {OUTPUT}")


if __name__ == "__main__":
    main(*sys.argv[1:])
