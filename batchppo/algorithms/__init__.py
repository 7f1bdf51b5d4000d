"""The learning algorithms: PPO (``ppo``), A2C (``a2c``), what they share (``common``: the
trainer over any agent, networks, torsos, evaluation) and their registry (``registry``), through
which the experiment layer knows an algorithm."""
