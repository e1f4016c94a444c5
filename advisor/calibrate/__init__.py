"""The lab: every fit and every evaluation of the runtime model (advisor.predict, advisor.plan), over the seed sweep,
the committed campaigns under ``calibration/`` (their folder lists: ``calibration/manifests.yaml``) and the probe
store. ``advisor calibrate`` runs it; ``advisor calibrate rebuild TABLE`` rewrites each shipped table from its inputs.
Nothing under predict/ or plan/ imports it (tests/test_import_graph.py)."""
