"""The learning algorithms: PPO (``ppo``), A2C (``a2c``), what they share (``training``: the
trainer over any agent, compiled programs, evaluation; ``networks``: the policy and value
networks, torsos, encoders and heads) and their registry (``registry``), through which the
experiment layer knows an algorithm."""
