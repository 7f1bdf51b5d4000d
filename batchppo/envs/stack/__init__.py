"""The wrapper stack: the wrappers Gymnasium lacks, a config's env_wrappers, the standard stack per
env or as one BatchTransform over a worker's envs, the EnvGroup that steps them, and Atari's
preprocessing."""
