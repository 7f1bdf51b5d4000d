"""Reading finished runs: evaluation of a saved run, the peers' scoring protocols, aggregate
statistics with bootstrap intervals, and learning-curve plots."""
