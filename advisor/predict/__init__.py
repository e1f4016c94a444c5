"""The K > R predictor: step-cost physics (R), K̄ priors, a calibrated model, and its evaluation.

Heavy imports (scikit-learn, numpy) stay inside the functions that need them.
"""
