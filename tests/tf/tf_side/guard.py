"""A SessionHook whose output cannot be written must not break training (runs in the TF venv).

usage: python guard.py OUT_FILE  (OUT_FILE is a regular file: the hook's out_dir cannot be a directory)
Prints the losses, then "trained 5" and whether the hook disabled itself.
"""

from __future__ import annotations

import sys

import murphy.hook
import murphy.rules
import murphy.trial

# murphy's hook, trial and rules packages never import TensorFlow themselves.
assert "tensorflow" not in sys.modules, "murphy imported TensorFlow"
import numpy as np  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

import murphy.hook.tensorflow as smd  # noqa: E402

tf.disable_v2_behavior()
assert murphy.hook.tensorflow is smd and murphy.rules and murphy.trial

hook = smd.SessionHook(out_dir=sys.argv[1] + "/tensors", save_config=smd.SaveConfig(save_interval=1),
                       include_collections=["weights", "gradients", "losses"])
x = tf.placeholder(tf.float32, shape=(None, 2))
w = tf.Variable([[1.0], [1.0]], name="w")
loss = tf.reduce_mean(tf.matmul(x, w) ** 2, name="loss")
hook.add_to_collection("losses", loss)
hook.add_to_collection("losses", object())  # not a tensor: a warning, not an error
train = hook.wrap_optimizer(tf.train.GradientDescentOptimizer(0.1)).minimize(loss)
steps = 0
with tf.train.MonitoredSession(hooks=[hook]) as sess:
    for _ in range(5):
        sess.run([loss, train], {x: np.ones((4, 2))})
        steps += 1
hook.close()
print("trained", steps, "enabled", hook.enabled, flush=True)
