"""sampling-lab: exact, verified item-sampling evaluation of recommender systems."""
__version__ = "0.1.0"
