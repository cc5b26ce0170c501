"""Ensembles (``platform: "ensemble"``): models whose steps are other models.

:mod:`~naiad.ensemble.graph` checks an ensemble's steps on their own and
:mod:`~naiad.ensemble.composition` against the composing models' configs, both with Triton's
messages; :mod:`~naiad.ensemble.run` executes one request's steps as their inputs become ready, and
:mod:`~naiad.ensemble.backend` plugs it all into the load pipeline as a built-in backend.
"""

ENSEMBLE_BACKEND = "ensemble"
"""The name the built-in ensemble backend is registered under (an ensemble's config names no backend)."""
