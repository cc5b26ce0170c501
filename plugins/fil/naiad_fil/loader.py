"""``naiad_load_model`` for FIL models: parameters, file, engine, config completion."""

from __future__ import annotations

import logging

from naiad.backend import ModelLoadContext
from naiad_fil.autocomplete import complete_config
from naiad_fil.engines import load_cpu_engine
from naiad_fil.files import locate
from naiad_fil.model import FilModel
from naiad_fil.parameters import parse_parameters
from naiad_fil.postprocess import OutputRule

_log = logging.getLogger("naiad.fil")


def load_model(context: ModelLoadContext) -> FilModel:
    """Load one version; raises :class:`naiad.errors.NaiadError` naming the model and file on failure."""
    params = parse_parameters(context.config)
    source = locate(context, params.model_type)
    engine = load_cpu_engine(source, params)
    try:
        facts = engine.facts
        classifier = params.is_classifier
        if classifier is None:
            classifier = bool(facts.classifier)
            _log.info(
                "model '%s': is_classifier not set; using '%s' from the model's objective",
                context.model_name,
                str(classifier).lower(),
            )
        rule = OutputRule(classifier, params.predict_proba, params.threshold, facts.num_outputs)
        rule = complete_config(context, source.path, facts, rule)
    except BaseException:
        engine.close()
        raise
    _log.info(
        "model '%s' version %d: %s with %d features, %d score column(s), %s; CPU engine: %s",
        context.model_name,
        context.version,
        source.description,
        facts.num_features,
        facts.num_outputs,
        "classifier" if rule.classifier else "regressor",
        engine.description,
    )
    return FilModel(source, params, facts, rule, engine)
