"""Programs that run by their path in a fresh interpreter without keras_vit.

Each imports TensorFlow, NumPy and the standard library only, never
keras_vit: what it checks is that an export works where keras_vit is not
installed. Run one by its path (`python .../saved_model_check.py ...`):
`python -m keras_vit.export.standalone...` would import keras_vit first.
This folder is then first on `sys.path`, so nothing else belongs here.
"""
