"""The one registry of keras_vit's models: variants, builders and presets.

Data only (it imports nothing heavy, so the command line and the argument
checks can read it): `variants` holds the variant table (`VARIANTS`,
`"B/16"` -> `keras_vit.ViT` arguments) and the builders' names
(`BUILDERS`, `"ViT_B16"` -> `"B/16"`); `presets` holds every released
checkpoint as one literal record under a unique name
(`"vit_b16_augreg_in21k_ft_in1k"`; the scheme is in its docstring);
`resolve` says what a model name stands for. Building a model from any of
these (or from a file) is `keras_vit.resolver.resolve_model`.
"""

from keras_vit.registry.names import Resolved
from keras_vit.registry.names import resolve
from keras_vit.registry.presets import FIELDS
from keras_vit.registry.presets import PRESETS
from keras_vit.registry.presets import find_preset
from keras_vit.registry.presets import get_preset
from keras_vit.registry.presets import list_presets
from keras_vit.registry.presets import named_preset
from keras_vit.registry.presets import preset_names
from keras_vit.registry.presets import presets_table
from keras_vit.registry.variants import BUILDER_OF
from keras_vit.registry.variants import BUILDERS
from keras_vit.registry.variants import HYBRID_STEMS
from keras_vit.registry.variants import PATCH_SIZES
from keras_vit.registry.variants import VARIANTS
from keras_vit.registry.variants import WIDTHS
from keras_vit.registry.variants import find_variant
from keras_vit.registry.variants import get_variant
from keras_vit.registry.variants import model_name

__all__ = [
    "BUILDERS",
    "BUILDER_OF",
    "FIELDS",
    "HYBRID_STEMS",
    "PATCH_SIZES",
    "PRESETS",
    "Resolved",
    "VARIANTS",
    "WIDTHS",
    "find_preset",
    "find_variant",
    "get_preset",
    "get_variant",
    "list_presets",
    "model_name",
    "named_preset",
    "preset_names",
    "presets_table",
    "resolve",
]
