"""The guard of keras_vit's overrides of private Keras methods
(`keras_vit.models.keras_fixes.overrides_private`)."""

import keras
import pytest

# Imported for the overrides they declare (the trainer's and the
# optimizers' mixins).
from keras_vit.models import keras_fixes
from keras_vit.training import recipe  # noqa: F401

#: Every private override keras_vit has: a new one must be declared.
EXPECTED = {
    ("Model", "_maybe_symbolic_build"),
    ("Optimizer", "_clip_gradients"),
    ("Optimizer", "_all_reduce_sum_gradients"),
    ("Optimizer", "_apply_weight_decay"),
}


def test_every_private_override_is_in_force_on_this_keras():
    installed = {
        (base.__name__, name) for base, name, _ in keras_fixes.PRIVATE_OVERRIDES
    }
    assert installed == EXPECTED


def test_this_keras_is_one_the_overrides_were_checked_on():
    # A later Keras may have fixed what an override works around, or
    # changed the method's meaning under the same parameters: check each
    # (their docstrings say what they work around), then raise
    # CHECKED_THROUGH.
    version = tuple(int(part) for part in keras.__version__.split(".")[:2])
    assert version <= keras_fixes.CHECKED_THROUGH, (
        f"Keras {keras.__version__} is newer than the release the private "
        f"overrides were checked on ({keras_fixes.CHECKED_THROUGH})"
    )


def test_an_override_of_a_method_keras_changed_is_taken_off():
    class Base:
        def _step(self, a, b):
            return "keras"

    with pytest.warns(RuntimeWarning, match="Fix._step works around"):

        @keras_fixes.overrides_private(Base, "_step")
        class Fix:
            def _step(self, a):  # another signature than Keras's
                return "fixed"

    assert not hasattr(Fix, "_step")

    class Model(Fix, Base):
        pass

    assert Model()._step(1, 2) == "keras"
    with pytest.warns(RuntimeWarning, match="does not have in that form"):
        keras_fixes.overrides_private(Base, "_gone")(
            type("Gone", (), {"_gone": lambda self: None})
        )
