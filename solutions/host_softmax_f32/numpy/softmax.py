"""Host softmax in numpy, returning its output (destination_passing_style false)."""
import numpy as np


def run(x):
    shifted = x - x.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    e /= e.sum(axis=1, keepdims=True)
    return e
