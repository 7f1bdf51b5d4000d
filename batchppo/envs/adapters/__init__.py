"""The batch env under other libraries' APIs: SB3's VecEnv, Ray actors as workers, and
AsyncVectorEnv's arguments."""
