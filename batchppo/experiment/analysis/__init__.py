"""Reading runs: evaluation and its protocols, the peers' scoring protocols, aggregate statistics
and plots."""
