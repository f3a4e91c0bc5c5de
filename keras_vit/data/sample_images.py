"""Sample images shipped with the package, for examples and quick checks.

`keras_vit/data/samples/` holds them; its README.md says where each comes
from and under which licence.
"""

import os

#: The shipped images, by name: their files under `keras_vit/data/samples/`.
SAMPLE_IMAGES = {"cat": "cat.jpg"}


def sample_image_path(name="cat"):
    """The path of a sample image shipped with keras_vit.

    Args:
        name: which image (`SAMPLE_IMAGES`): `"cat"`, scikit-image's
            "Chelsea the cat" (CC0), a 384 x 256 JPEG. Defaults to `"cat"`.

    Returns:
        The absolute path of the image file.

    Raises:
        ValueError: for a name that is no sample image.

    Example:

    >>> keras_vit.sample_image_path("cat").endswith("cat.jpg")
    True
    """
    if name not in SAMPLE_IMAGES:
        raise ValueError(
            "Unknown sample image. Expected one of "
            f"{sorted(SAMPLE_IMAGES)}. Received: name={name!r}"
        )
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "samples", SAMPLE_IMAGES[name])
