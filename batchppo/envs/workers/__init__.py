"""The worker processes under a BatchEnv: the pool and its slots, the messages to them, their
life, their deaths and restarts, the shared memory, the pending call and the workers' stderr."""
