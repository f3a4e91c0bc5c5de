"""keras_vit's own files: `.weights.h5` (`model.save_weights`) and `.keras`.

Keras stores a layer's own variables as `vars/0, vars/1, ...` under a group
whose `vars` carries the layer's name; nesting follows the layer tree. This
reader turns each entry into keras_vit's variable path
(`block_0/attention/qkv/kernel`) by looking the layer up in the model the
weights are for, so the same checks as for every other format apply
(head and resolution changes included). Nothing is deserialised but arrays:
a `.keras` archive's `config.json` is never executed.
"""

import io
import zipfile

import h5py
import numpy as np

from keras_vit.weights.checkpoint import Checkpoint


def _own_variables(layer):
    # The order Keras's Layer.save_own_variables writes them in.
    return list(layer._trainable_variables) + list(layer._non_trainable_variables)


def _sublayer(layer, name):
    for child in getattr(layer, "_layers", []):
        if child.name == name:
            return child
    return None


def _read_h5(file, path, model):
    tensors, unexpected = {}, []
    layers = {layer.name: layer for layer in model.layers}

    def visit(group, chain, layer):
        if "vars" in group:
            for index, dataset in group["vars"].items():
                value = np.asarray(dataset)
                own = _own_variables(layer) if layer is not None else []
                if layer is not None and int(index) < len(own):
                    tensors[own[int(index)].path] = value
                else:
                    unexpected.append("/".join(chain) + f"/vars/{index}")
        for key, child in group.items():
            if key == "vars" or not isinstance(child, h5py.Group):
                continue
            name = child["vars"].attrs.get("name", key) if "vars" in child else key
            sub = None
            if layer is None and not chain:
                sub = layers.get(name)
            elif layer is not None:
                sub = _sublayer(layer, name)
            visit(child, chain + [str(name)], sub)

    if "layers" not in file:
        raise ValueError(
            f"{path} is not a Keras weights file (no 'layers' group)."
        )
    visit(file["layers"], [], None)
    grid = None
    posemb = tensors.get("patch_encoder/position_embedding")
    if posemb is not None:
        model_grid = tuple(model.grid_size)
        prefix = int("patch_encoder/class_token" in tensors)
        if posemb.shape[1] - prefix == model_grid[0] * model_grid[1]:
            grid = model_grid
    return Checkpoint(
        tensors=tensors,
        source="keras",
        path=path,
        patch_size=model.patch_size,
        grid_size=grid,
        unexpected=sorted(unexpected),
    )


def read_keras_weights(path, model):
    """Reads a `.weights.h5` or `.keras` file for `model`."""
    if str(path).endswith(".keras"):
        with zipfile.ZipFile(path) as archive:
            data = archive.read("model.weights.h5")
        with h5py.File(io.BytesIO(data), "r") as file:
            return _read_h5(file, path, model)
    with h5py.File(path, "r") as file:
        return _read_h5(file, path, model)
