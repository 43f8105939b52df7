"""Alert rules: what each kind watches, its parameters, and the pure evaluation of one rule.

Every statistic comes from ``observatory.core.trends`` (the one implementation of shares, medians and
the G > 16 share); this module only decides whether a statistic crossed a line. No database,
no clock: the evaluator (``evaluate.py``) loads rows and keeps state.

Rule kinds
----------
``median_g_shift``
    The median G of new models in the latest period moved by at least ``delta`` against the
    period before it (``compare=previous``) or against the mean of the medians of the
    ``baseline_periods`` periods before it (``compare=baseline``). The alert is labelled with
    the period, so a new shift next period is a new alert; the old one resolves when a later
    period is judged and does not repeat it.
``kind_share``
    The share of one kind bucket (MHA, MQA, GQA, MLA, hybrid, none; see ``trends``) in the
    latest period is ``above`` (>=) or ``below`` (<=) ``threshold``.
``g_over_16_share``
    The share of new models with G > 16 in the latest period is above/below ``threshold``.
``tp8_fill_share``
    The share of new models whose KV heads fill a TP = 8 node without replication (every KV
    layer's K divisible by 8, or MLA with data-parallel attention; ``core.trends``) crossed
    ``threshold``. Periods are judged on the models whose KV heads are known (``tp8_count``).
``release_changed``
    An organisation (``group_by=author``) or architecture family (``group_by=model_type``)
    released a model whose G or kind is not among those of its previous release. A release is
    every model the group published on one day (sizes of one family usually differ in G), so
    the alert is about a day's release that breaks with the day before it.
``new_dialect``
    A kind bucket appears for the first time (``watch=kinds``), or a config our parser does not
    fully understand appears (``watch=dialects``): an unknown layer type (reported once per
    layer-type name), a config.json that failed to parse (once per model), or a config transformers
    reads otherwise than we do (``watch=oracle``, or with dialects: once per model and reading, when
    the oracle's verdict becomes ``disagree``). ``all`` watches every one.

Judging a period
----------------
The latest period is the newest one holding at least ``min_models`` models (a partial current
month with two models is not a trend), and for comparisons the period right before it must
qualify too. With too little data a rule says nothing and the alert keeps its state.

Hysteresis
----------
A finding is ``fire`` (over the line), ``clear`` (back past the line by more than
``hysteresis``) or ``hold`` (in between). A firing alert resolves only on ``clear``; a resolved
one fires only on ``fire``. So a share wobbling around 20 % with hysteresis 0.02 fires once
when it first reaches 20 % and resolves only when it drops below 18 %. Because the decision
depends only on the data and the stored state, evaluating the same data twice changes nothing.

One-shot rules (``release_changed``, ``new_dialect``) report events, not states: each finding
is notified once and never "resolves". The first evaluation of such a rule that sees any data
absorbs what already exists (history is not news); only what appears later is notified.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from observatory.core.deployment import NODE_TP
from observatory.core.trends import (
    ATTENTION_KINDS,
    G_TIPPING_POINT,
    ORIGINALS_MIN_PARAMS,
    PERIODS,
    POPULATIONS,
    SHARE_KEYS,
    THIN_N,
    WEIGHTINGS,
    TrendPoint,
    TrendRow,
    attention_stack,
    describe_kind,
    fills_tp8_node,
    group_by_period,
    period_label,
    points_from_groups,
)
from observatory.store.trends import Population

MAX_MODELS_LISTED = 20  # models named in one alert; the payload says how many were left out


class RuleError(ValueError):
    """A rule definition that cannot be evaluated; ``errors`` lists every problem."""

    def __init__(self, errors: list[str]):
        self.errors = errors
        super().__init__("; ".join(errors))


@dataclass(frozen=True)
class Param:
    name: str
    type: type
    default: Any
    help: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None

    def coerce(self, value: Any) -> Any:
        if self.type is str:
            if not isinstance(value, str) or (self.choices and value not in self.choices):
                raise ValueError(f"{self.name} must be one of {', '.join(self.choices or ())}")
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(f"{self.name} must be a number")
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{self.name} must be a number") from None
        if number != number or number in (float("inf"), float("-inf")):
            raise ValueError(f"{self.name} must be a finite number")
        if self.type is int:
            if not number.is_integer():
                raise ValueError(f"{self.name} must be a whole number")
            number = int(number)
        if self.minimum is not None and number < self.minimum:
            raise ValueError(f"{self.name} must be at least {self.minimum:g}")
        if self.maximum is not None and number > self.maximum:
            raise ValueError(f"{self.name} must be at most {self.maximum:g}")
        return number


@dataclass(frozen=True)
class RuleKind:
    name: str
    title: str
    description: str
    params: tuple[Param, ...]
    stateful: bool  # False: one-shot events (never resolved)


_PERIOD = Param("period", str, "month", "period length", choices=PERIODS)
_WEIGHTING = Param("weighting", str, "count", "weigh models by count or by downloads", choices=WEIGHTINGS)
_MIN_MODELS = Param("min_models", int, THIN_N, "a period is judged only with at least this many models", THIN_N,
                    100_000)
_DIRECTION = Param("direction", str, "above", "fire when the share is above (>=) or below (<=) the threshold",
                   choices=("above", "below"))
_SHARE_HYSTERESIS = Param("hysteresis", float, 0.02, "resolve only once the share is this far back past the "
                          "threshold", 0.0, 0.5)

RULE_KINDS: dict[str, RuleKind] = {
    kind.name: kind
    for kind in (
        RuleKind(
            "median_g_shift", "Median G moved",
            "The median G = H/K of the latest period moved by at least delta.",
            (
                Param("delta", float, 2.0, "smallest move of the median that fires", 0.01, 1024),
                Param("compare", str, "previous", "against the previous period or a trailing baseline",
                      choices=("previous", "baseline")),
                Param("baseline_periods", int, 3, "periods in the trailing baseline", 1, 36),
                Param("hysteresis", float, 0.5, "resolve only once the move is this much below delta", 0, 1024),
                _PERIOD, _WEIGHTING, _MIN_MODELS,
            ),
            stateful=True,
        ),
        RuleKind(
            "kind_share", "Share of an attention kind",
            "The share of one attention kind (among models with attention layers, hybrids included) or of one "
            "stack type (hybrid, attention-free; among all models) crossed a threshold between the two latest "
            "judged periods.",
            (
                Param("kind", str, "MLA", "attention kind, or stack type hybrid / attention-free",
                      choices=SHARE_KEYS),
                _DIRECTION,
                Param("threshold", float, 0.2, "share between 0 and 1", 0.0, 1.0),
                _SHARE_HYSTERESIS, _PERIOD, _WEIGHTING, _MIN_MODELS,
            ),
            stateful=True,
        ),
        RuleKind(
            "g_over_16_share", f"Share with G > {G_TIPPING_POINT}",
            f"The share of models with G > {G_TIPPING_POINT} crossed a threshold between the two latest judged periods.",
            (
                _DIRECTION,
                Param("threshold", float, 0.1, "share between 0 and 1", 0.0, 1.0),
                _SHARE_HYSTERESIS, _PERIOD, _WEIGHTING, _MIN_MODELS,
            ),
            stateful=True,
        ),
        RuleKind(
            "tp8_fill_share", f"Share filling a TP = {NODE_TP} node",
            f"The share of models whose KV heads fill a TP = {NODE_TP} node without replication (K divisible by "
            f"{NODE_TP}, or MLA with data-parallel attention) crossed a threshold between the two latest judged periods.",
            (
                _DIRECTION,
                Param("threshold", float, 0.5, "share between 0 and 1", 0.0, 1.0),
                _SHARE_HYSTERESIS, _PERIOD, _WEIGHTING, _MIN_MODELS,
            ),
            stateful=True,
        ),
        RuleKind(
            "release_changed", "A release changed G or kind",
            "An organisation or architecture family released models whose G or attention kind is not "
            "among those of its previous release.",
            (
                Param("group_by", str, "author", "organisation (author) or architecture family (model_type)",
                      choices=("author", "model_type")),
                Param("watch", str, "any", "what counts as a change", choices=("any", "group_size", "kind")),
            ),
            stateful=False,
        ),
        RuleKind(
            "new_dialect", "New attention kind or unknown dialect",
            "An attention kind appears for the first time, or configs appear that the parser does not "
            "understand (unknown layer types, configs that fail to parse).",
            (Param("watch", str, "all", "kinds, dialects (with the oracle's disagreements), the oracle's disagreements"
                   " alone, or all", choices=("all", "kinds", "dialects", "oracle")),),
            stateful=False,
        ),
    )
}

# Evaluated for everyone (the public feed) unless settings turn them off.
BUILT_IN_RULES: tuple[tuple[str, dict], ...] = (
    ("median_g_shift", {}),
    ("kind_share", {"kind": "MLA", "direction": "above", "threshold": 0.2}),
    ("kind_share", {"kind": "MHA", "direction": "below", "threshold": 0.05}),
    ("g_over_16_share", {"direction": "above", "threshold": 0.1}),
    ("tp8_fill_share", {"direction": "below", "threshold": 0.5, "period": "quarter"}),
    ("release_changed", {}),
    ("new_dialect", {}),
)

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$"  # an organisation or architecture family
_NAME = re.compile(NAME_PATTERN)


def make_population(data: dict | None) -> Population:
    data = dict(data or {})
    errors = []
    unknown = sorted(set(data) - {"lineage", "min_params", "min_downloads", "author", "model_type"})
    if unknown:
        errors.append(f"population: unknown field(s) {', '.join(unknown)}")
    lineage = data.get("lineage") or "originals"
    if lineage not in POPULATIONS:
        errors.append(f"population.lineage must be one of {', '.join(POPULATIONS)}")
        lineage = "originals"
    min_params = data.get("min_params")
    if min_params is not None and (isinstance(min_params, bool) or not isinstance(min_params, (int, float))
                                   or not 0 <= min_params <= 1e15):
        errors.append("population.min_params must be a number >= 0")
        min_params = None
    min_downloads = data.get("min_downloads") or 0
    if isinstance(min_downloads, bool) or not isinstance(min_downloads, int) or not 0 <= min_downloads <= 10**12:
        errors.append("population.min_downloads must be a whole number >= 0")
        min_downloads = 0
    names = {}
    for key in ("author", "model_type"):
        value = data.get(key)
        if value in (None, ""):
            names[key] = None
        elif not isinstance(value, str) or not _NAME.match(value):
            errors.append(f"population.{key} must be a name of letters, digits, '_', '.', '-'")
            names[key] = None
        else:
            names[key] = value
    if errors:
        raise RuleError(errors)
    return Population(lineage, min_params=min_params, min_downloads=min_downloads, **names)


def population_dict(population: Population) -> dict:
    return {"lineage": population.lineage, "min_params": population.min_params,
            "min_downloads": population.min_downloads, "author": population.author,
            "model_type": population.model_type}


@dataclass(frozen=True)
class RuleSpec:
    kind: str
    params: dict  # every parameter, defaults filled in
    population: Population

    @property
    def definition(self) -> dict:
        return {"kind": self.kind, "params": self.params, "population": population_dict(self.population)}

    @property
    def key(self) -> str:
        """Same definition, same key: subscriptions to an identical rule share its alerts."""
        return hashlib.sha256(json.dumps(self.definition, sort_keys=True).encode()).hexdigest()[:32]

    @property
    def stateful(self) -> bool:
        return RULE_KINDS[self.kind].stateful

    @property
    def title(self) -> str:
        p = self.params
        if self.kind == "median_g_shift":
            against = "the previous period" if p["compare"] == "previous" else \
                f"the {p['baseline_periods']}-period baseline"
            text = f"Median G moved by >= {p['delta']:g} against {against} ({p['period']})"
        elif self.kind == "kind_share":
            sign = ">=" if p["direction"] == "above" else "<="
            text = f"Share of {p['kind']} {sign} {p['threshold']:.0%} ({p['period']})"
        elif self.kind == "g_over_16_share":
            sign = ">=" if p["direction"] == "above" else "<="
            text = f"Share with G > {G_TIPPING_POINT} {sign} {p['threshold']:.0%} ({p['period']})"
        elif self.kind == "tp8_fill_share":
            sign = ">=" if p["direction"] == "above" else "<="
            text = f"Share filling a TP = {NODE_TP} node without replication {sign} {p['threshold']:.0%} ({p['period']})"
        elif self.kind == "release_changed":
            who = "an organisation" if p["group_by"] == "author" else "an architecture family"
            text = f"A release of {who} changed {'G or kind' if p['watch'] == 'any' else p['watch']}"
        else:
            text = {"all": "New attention kind or unknown dialect", "kinds": "New attention kind",
                    "dialects": "Unknown attention dialect",
                    "oracle": "transformers reads a config otherwise"}[p["watch"]]
        return text + ("" if self.population.key == "originals" else f" [{self.population.key}]")


def make_rule(kind: str, params: dict | None = None, population: dict | Population | None = None) -> RuleSpec:
    """Validate and normalise a rule definition; raise ``RuleError`` listing every problem."""
    if kind not in RULE_KINDS:
        raise RuleError([f"unknown rule kind {kind!r}; expected one of {', '.join(RULE_KINDS)}"])
    spec = RULE_KINDS[kind]
    params = dict(params or {})
    errors = []
    unknown = sorted(set(params) - {p.name for p in spec.params})
    if unknown:
        errors.append(f"params: unknown parameter(s) for {kind}: {', '.join(unknown)}")
    normalised = {}
    for param in spec.params:
        try:
            normalised[param.name] = param.coerce(params.get(param.name, param.default))
        except ValueError as exc:
            errors.append(f"params.{exc}")
    try:
        pop = population if isinstance(population, Population) else make_population(population)
    except RuleError as exc:
        errors.extend(exc.errors)
        pop = Population()
    if errors:
        raise RuleError(errors)
    return RuleSpec(kind, normalised, pop)


# ---- findings ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """What one rule says about one alert identity (its labels)."""

    labels: dict[str, str]
    state: str  # fire | hold | clear
    value: float | None
    summary: str
    details: dict = field(default_factory=dict)  # period, before/after, models that moved it


@dataclass(frozen=True)
class RuleResult:
    findings: list[Finding]
    # True when the rule had data to judge: firing alerts of the rule that it did not mention
    # resolve. False (too little data) keeps every alert as it is.
    judged: bool


def transition(status: str | None, finding: Finding | None, *, stateful: bool, judged: bool) -> str:
    """The next step of one alert: ``fire``, ``keep``, ``resolve`` or ``none``.

    ``status`` is the stored state (None if the alert never existed); ``finding`` is None when
    the rule did not mention this alert this time.
    """
    if not stateful:
        return "fire" if status is None and finding is not None and finding.state == "fire" else "none"
    if status == "firing":
        if finding is None:
            return "resolve" if judged else "keep"
        return "resolve" if finding.state == "clear" else "keep"
    return "fire" if finding is not None and finding.state == "fire" else "none"


def fingerprint(rule_key: str, labels: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps([rule_key, labels], sort_keys=True).encode()).hexdigest()[:32]


def _iso(value: date | datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def model_brief(row: TrendRow) -> dict:
    return {
        "id": row.model_id,
        "author": row.author,
        "model_type": row.model_type,
        "kind": describe_kind(row.attention_kind, row.is_hybrid),
        "group_size": row.group_size,
        "downloads": row.downloads,
        "created_at": _iso(row.created_at),
    }


def _listed(rows: Iterable[TrendRow]) -> tuple[list[dict], int]:
    rows = list(rows)
    return [model_brief(r) for r in rows[:MAX_MODELS_LISTED]], max(0, len(rows) - MAX_MODELS_LISTED)


def _past(value: float, threshold: float, direction: str) -> bool:
    return value >= threshold if direction == "above" else value <= threshold


def _band(value: float, threshold: float, hysteresis: float, direction: str) -> str:
    if direction == "above":
        return "fire" if value >= threshold else "clear" if value < threshold - hysteresis else "hold"
    return "fire" if value <= threshold else "clear" if value > threshold + hysteresis else "hold"


# The newest judged period must be one of the last this many periods with any model: a rule
# never reports on a month long past just because the recent ones are thin.
FRESH_PERIODS = 2


def _all_models(point: TrendPoint) -> int:
    return point.count


def _eligible(point: TrendPoint, min_models: int, has_value, n_of=_all_models) -> bool:
    """A period is judged when its value rests on enough models: ``n_of`` counts the models that have
    the value (a median G rests on the models with a G, not on every model of the period)."""
    return n_of(point) >= max(min_models, THIN_N) and has_value(point)


def _latest_qualifying(points: Sequence[TrendPoint], min_models: int, has_value, n_of=_all_models) -> int | None:
    """The newest eligible period, if it is fresh (see FRESH_PERIODS); thin periods never qualify."""
    recent = [i for i in range(len(points)) if points[i].count][-FRESH_PERIODS:]
    for i in reversed(recent):
        if _eligible(points[i], min_models, has_value, n_of):
            return i
    return None


def _previous_eligible(points: Sequence[TrendPoint], i: int, min_models: int, has_value,
                       n_of=_all_models) -> int | None:
    return next((j for j in range(i - 1, -1, -1) if _eligible(points[j], min_models, has_value, n_of)), None)


def _g_models(point: TrendPoint) -> int:
    return point.g_count


def _attention_models(point: TrendPoint) -> int:
    return point.attn_count


def evaluate_trend_rule(spec: RuleSpec, rows: Sequence[TrendRow]) -> RuleResult:
    """Judge a trend rule (median shift, kind share, G > 16 share) on a population's rows."""
    p = spec.params
    groups = group_by_period(rows, p["period"])
    return judge_trend_points(spec, points_from_groups(groups, p["period"], p["weighting"]), groups)


def judge_trend_points(spec: RuleSpec, points: Sequence[TrendPoint], groups) -> RuleResult:
    """Judge a trend rule on its series (``points``, oldest first, empty periods included) and
    the models of its periods: ``groups.get(period_start, [])`` gives one period's rows. Only the
    judged period's rows are asked for, so a caller can read them from the store on demand."""
    p = spec.params
    if spec.kind == "median_g_shift":
        return _median_shift(spec, points, groups)
    if spec.kind == "kind_share":
        kind = p["kind"]
        if kind in ATTENTION_KINDS:
            return _share_rule(spec, points, groups, lambda pt: pt.shares[kind],
                               lambda r: r.attention_kind == kind, f"share of {kind}", n_of=_attention_models)
        return _share_rule(spec, points, groups, lambda pt: pt.stack_shares[kind],
                           lambda r: attention_stack(r.attention_kind, r.is_hybrid) == kind, f"share of {kind} models")
    if spec.kind == "g_over_16_share":
        return _share_rule(spec, points, groups, lambda pt: pt.share_g_over_16,
                           lambda r: r.group_size is not None and r.group_size > G_TIPPING_POINT,
                           f"share with G > {G_TIPPING_POINT}", n_of=_g_models)
    if spec.kind == "tp8_fill_share":
        # judged on the models whose KV heads are known
        return _share_rule(spec, points, groups, lambda pt: pt.share_tp8_fill,
                           fills_tp8_node, f"share filling a TP = {NODE_TP} node without replication",
                           among=lambda r: r.attention_kind == "MLA" or r.kv_tp_max is not None,
                           n_of=lambda pt: pt.tp8_count)
    raise RuleError([f"{spec.kind} is not a trend rule"])



def _point_summary(point: TrendPoint, label: str, n_of=_all_models) -> dict:
    # count: the models the value rests on (the floor's n); period_models: every model of the period
    return {"period": label, "count": n_of(point), "period_models": point.count, "weight_total": point.weight_total}


def _median_shift(spec: RuleSpec, points: list[TrendPoint], groups: dict) -> RuleResult:
    p = spec.params
    has_g = lambda pt: pt.g_median is not None
    i = _latest_qualifying(points, p["min_models"], has_g, _g_models)
    if i is None or i == 0:
        return RuleResult([], judged=False)
    # The reference: the period right before (a gap is never bridged), or the qualifying ones
    # among the baseline_periods before.
    wanted = 1 if p["compare"] == "previous" else p["baseline_periods"]
    window = [pt for pt in points[max(0, i - wanted):i] if _eligible(pt, p["min_models"], has_g, _g_models)]
    if not window:
        return RuleResult([], judged=False)
    current = points[i]
    label = period_label(current.period_start, p["period"])
    reference = sum(pt.g_median for pt in window) / len(window)
    move = current.g_median - reference
    size = abs(move)
    state = "fire" if size >= p["delta"] else "clear" if size < p["delta"] - p["hysteresis"] else "hold"
    # The models that moved it: this period's models on the side the median moved to.
    movers = [r for r in groups.get(current.period_start, [])
              if r.group_size is not None and (r.group_size > reference if move > 0 else r.group_size < reference)]
    movers.sort(key=lambda r: (-abs(r.group_size - reference), r.model_id))
    models, more = _listed(movers)
    ref_labels = [period_label(pt.period_start, p["period"]) for pt in window]
    direction = "rose" if move > 0 else "fell" if move < 0 else "stayed"
    summary = (f"Median G {direction} from {reference:g} ({', '.join(ref_labels)}) to {current.g_median:g} "
               f"in {label} ({move:+g}; delta {p['delta']:g})")
    details = {
        "period": label,
        "period_start": current.period_start.isoformat(),
        "statistic": "median G",
        # count: models with a G, the n each median rests on; period_models: every model of the period
        "before": {"value": reference, "periods": ref_labels, "count": sum(pt.g_count for pt in window),
                   "period_models": sum(pt.count for pt in window)},
        "after": {"value": current.g_median, "period": label, "count": current.g_count,
                  "period_models": current.count,
                  "g_p25": current.g_p25, "g_p75": current.g_p75},
        "change": move,
        "models": models,
        "models_not_listed": more,
    }
    return RuleResult([Finding({"period": label}, state, move, summary, details)], judged=True)


def _share_rule(spec, points, groups, value_of, selects, name: str, among=lambda r: True,
                n_of=_all_models) -> RuleResult:
    """Fires on a crossing only: the latest judged period past the threshold while the previous
    judged period was on the other side. Staying past it holds (a firing alert stays firing, no
    new alert starts); coming back past the hysteresis band clears."""
    p = spec.params
    has_value = lambda pt: value_of(pt) is not None  # noqa: E731
    i = _latest_qualifying(points, p["min_models"], has_value, n_of)
    if i is None:
        return RuleResult([], judged=False)
    current = points[i]
    value = value_of(current)
    label = period_label(current.period_start, p["period"])
    j = _previous_eligible(points, i, p["min_models"], has_value, n_of)
    previous = points[j] if j is not None else None
    state = _band(value, p["threshold"], p["hysteresis"], p["direction"])
    if state == "fire" and (previous is None or _past(value_of(previous), p["threshold"], p["direction"])):
        state = "hold"  # no crossing: it was already past the threshold (or nothing to compare with)
    rows = [r for r in groups.get(current.period_start, []) if among(r)]
    chosen = [r for r in rows if selects(r)] if p["direction"] == "above" else [r for r in rows if not selects(r)]
    chosen.sort(key=lambda r: (-(r.downloads or 0), r.model_id))
    models, more = _listed(chosen)
    sign = ">=" if p["direction"] == "above" else "<="
    before = value_of(previous) if previous else None
    was = f" (was {before:.1%} in {period_label(previous.period_start, p['period'])})" if previous else ""
    summary = f"The {name} is {value:.1%} in {label}{was}; threshold {sign} {p['threshold']:.0%}"
    details = {
        "period": label,
        "period_start": current.period_start.isoformat(),
        "statistic": name,
        "threshold": p["threshold"],
        "direction": p["direction"],
        "before": None if previous is None else {
            "value": before, **_point_summary(previous, period_label(previous.period_start, p["period"]), n_of)},
        "after": {"value": value, **_point_summary(current, label, n_of)},
        "models": models,
        "models_not_listed": more,
    }
    return RuleResult([Finding({}, state, value, summary, details)], judged=True)


def _signature(rows: Iterable[TrendRow], watch: str) -> set:
    out = set()
    for r in rows:
        kind = describe_kind(r.attention_kind, r.is_hybrid)
        out.add(kind if watch == "kind" else r.group_size if watch == "group_size" else (kind, r.group_size))
    return out


def evaluate_release_rule(spec: RuleSpec, rows: Sequence[TrendRow]) -> RuleResult:
    """One finding per (group, release day) whose models break with the group's previous release."""
    group_by, watch = spec.params["group_by"], spec.params["watch"]
    releases: dict[str, dict[date, list[TrendRow]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        key = r.author if group_by == "author" else r.model_type
        if key is None or r.created_at is None:
            continue
        day = r.created_at.date() if isinstance(r.created_at, datetime) else r.created_at
        releases[key][day].append(r)
    findings = []
    for key in sorted(releases):
        days = sorted(releases[key])
        for before_day, day in zip(days, days[1:]):
            before_rows, rows_now = releases[key][before_day], releases[key][day]
            seen = _signature(before_rows, watch)
            changed = [r for r in sorted(rows_now, key=lambda r: r.model_id)
                       if _signature([r], watch) - seen]
            if not changed:
                continue
            who = "Organisation" if group_by == "author" else "Family"
            first = changed[0]
            was = "; ".join(sorted({_describe(r) for r in before_rows})[:5])
            summary = (f"{who} {key} released {first.model_id} ({_describe(first)})"
                       f"{f' and {len(changed) - 1} more' if len(changed) > 1 else ''}; "
                       f"its previous release ({before_day.isoformat()}) had {was}")
            before_models, before_more = _listed(before_rows)
            after_models, after_more = _listed(changed)
            details = {
                "group_by": group_by,
                "group": key,
                "period": day.isoformat(),
                "before": {"release": before_day.isoformat(), "models": before_models,
                           "models_not_listed": before_more},
                "after": {"release": day.isoformat(), "models": after_models, "models_not_listed": after_more},
                "models": after_models,
                "models_not_listed": after_more,
            }
            value = first.group_size
            findings.append(Finding({"group": key, "release": day.isoformat()}, "fire", value, summary, details))
    return RuleResult(findings, judged=True)


def _describe(row: TrendRow) -> str:
    kind = describe_kind(row.attention_kind, row.is_hybrid)
    return f"{kind}, G={row.group_size:g}" if row.group_size is not None else kind


@dataclass(frozen=True)
class DialectRow:
    """What the dialect rule needs of a model's current config (geometry may be missing)."""

    model_id: str
    author: str | None
    model_type: str | None
    downloads: int | None  # None: unknown
    attention_kind: str | None  # None when the config failed to parse
    is_hybrid: bool
    warnings: tuple[str, ...]
    parse_error: str | None
    oracle_disagreement: str | None = None  # the oracle's reason, when it disagrees with the geometry
    oracle_version: str | None = None  # the transformers version that disagrees


_UNKNOWN_LAYER = re.compile(r'unknown layer type "?([^"]{1,80}?)"? counted as')


def unknown_layer_types(warnings: Iterable[str]) -> list[str]:
    """Layer-type names the geometry parser reported as unknown (see ``config_dialects.layer_kind``)."""
    found = []
    for text in warnings:
        match = _UNKNOWN_LAYER.search(text)
        if match and match.group(1) not in found:
            found.append(match.group(1))
    return found


def evaluate_dialect_rule(spec: RuleSpec, rows: Sequence[DialectRow]) -> RuleResult:
    """One finding per attention kind seen, per unknown layer type seen, per unparsable config."""
    watch = spec.params["watch"]
    by_label: dict[tuple, list[DialectRow]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: r.model_id):
        if watch in ("all", "kinds") and r.attention_kind is not None:
            by_label[("kind", describe_kind(r.attention_kind, r.is_hybrid))].append(r)
        if watch in ("all", "dialects"):
            for name in unknown_layer_types(r.warnings):
                by_label[("layer_type", name)].append(r)
            if r.parse_error is not None:
                by_label[("parse_error", r.model_id)].append(r)
        if watch in ("all", "dialects", "oracle") and r.oracle_disagreement is not None:
            # keyed by the reading, so a later different disagreement of the same model is news again
            by_label[("oracle_disagreement", f"{r.model_id}: {r.oracle_disagreement}"[:400])].append(r)
    findings = []
    for (what, value), members in sorted(by_label.items()):
        models = [{"id": r.model_id, "author": r.author, "model_type": r.model_type, "downloads": r.downloads}
                  for r in members[:MAX_MODELS_LISTED]]
        if what == "kind":
            summary = f"First {value} model(s) seen: {members[0].model_id}" + (
                f" and {len(members) - 1} more" if len(members) > 1 else "")
        elif what == "layer_type":
            summary = f"Unknown layer type {value!r} in {members[0].model_id}" + (
                f" and {len(members) - 1} more" if len(members) > 1 else "")
        elif what == "oracle_disagreement":
            summary = (f"transformers {members[0].oracle_version or ''} reads the config of {members[0].model_id}"
                       f" otherwise: {members[0].oracle_disagreement}").replace("transformers  reads", "transformers reads")
        else:
            summary = f"Config of {value} could not be parsed: {members[0].parse_error}"
        details = {
            "what": what,
            "value": value,
            "models": models,
            "models_not_listed": max(0, len(members) - MAX_MODELS_LISTED),
        }
        if what == "parse_error":
            details["error"] = members[0].parse_error
        if what == "oracle_disagreement":
            details["oracle"] = {"reason": members[0].oracle_disagreement,
                                 "transformers_version": members[0].oracle_version}
        findings.append(Finding({"what": what, "value": value}, "fire", None, summary[:480], details))
    return RuleResult(findings, judged=True)


def population_filter(population: Population, rows: Iterable[DialectRow]) -> list[DialectRow]:
    """The population's dialect rows (a config that failed to parse has no model type to match)."""
    return [r for r in rows
            if (not population.min_downloads or (r.downloads or 0) >= population.min_downloads)
            and (population.author is None or r.author == population.author)
            and (population.model_type is None or r.model_type == population.model_type)]
