"""The learning algorithms: PPO (``ppo``), A2C (``a2c``), what they share (``training``: the
trainer over any agent, compiled programs, evaluation; ``networks``: the policy and value
networks, torsos, encoders and heads; ``run_config``: the run-level fields every algorithm's
config subclasses) and their registry (``registry``), through which the experiment layer knows an
algorithm."""
