"""The main job, for now: build ViT-B/16, show it, and classify a photo.

The weights are random until training or checkpoint loading land, so the
prediction is meaningless; what this shows is the model end to end.
"""

import numpy as np

import keras_vit


def main():
    model = keras_vit.ViT_B16(num_classes=10)
    model.summary()
    images = np.random.default_rng(0).integers(0, 256, (2, 224, 224, 3))
    probabilities = model.predict(images.astype("uint8"), verbose=0)
    print("class probabilities of 2 random images:", probabilities.shape)
    print(np.round(probabilities, 3))


if __name__ == "__main__":
    main()
