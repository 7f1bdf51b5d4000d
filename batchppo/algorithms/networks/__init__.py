"""The policy and value networks every algorithm builds from a config and the env's spaces.

* ``networks``: the policy and value networks (``make_network``, from a config's
  ``NetworkConfig`` fields) and their distributions.
* ``torsos``: the registry of torsos, the CNNs a config's ``cnn`` names and the MLPs its ``mlp``
  names (imports no JAX).
* ``encoders``: each leaf of an observation space to a flat feature vector (the CNNs).
* ``heads``: features to the parameters of an action distribution, one head per action leaf.
* ``masking``: invalid-action masking of a ``Discrete`` action by an observation leaf.
"""
