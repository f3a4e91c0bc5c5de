"""The model: `ViT` (`vit`), its checked config (`config`), the checks of a
model handed to the package (`checks`) and its Keras workarounds
(`keras_fixes`).

The package imports none of them itself: `config` and `checks` sit below
the weights readers that `vit` imports (`keras_vit.ViT` is the public
name).
"""
