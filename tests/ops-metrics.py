#!/usr/bin/env python3
"""Check the alerting rules and the Grafana dashboard against /metrics.

Usage: ops-metrics.py METRICS RULES DASHBOARD PROMQL-OUT

METRICS is a scrape of hhc-gateway's /metrics; RULES the rules file
(YAML), DASHBOARD the dashboard (JSON).  Every metric name that a
rule's or a panel's expression uses must be a series the scrape has
(hhc_X_bucket, _sum and _count of a histogram family hhc_X, the other
families by their own name).  Every alert needs for:, a severity label,
summary and description; every panel a datasource and a target.  The
dashboard's expressions, with its variables replaced, are written to
PROMQL-OUT as recording rules for `promtool check rules` (PromQL
syntax).  Prints one line per problem and exits 1 if there is one.
"""
import json
import re
import sys

import yaml

NAME = re.compile(r"\bhhc_[A-Za-z0-9_:]*")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
DS_UID = "${DS_PROMETHEUS}"
problems = []


def exported_series(path):
    """The series names a scrape holds: samples, and its families."""
    names = set()
    for line in open(path):
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split()
            if kind == "histogram":
                names.update(family + s for s in ("_bucket", "_sum", "_count"))
            else:
                names.add(family)
        elif line.strip() and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def check_names(where, expr, exported):
    for name in sorted(set(NAME.findall(STRING.sub('""', expr)))):
        if name not in exported:
            problems.append(f"{where}: {name}: not in /metrics")


def check_rules(path, exported):
    doc = yaml.safe_load(open(path))
    for group in doc["groups"]:
        for rule in group["rules"]:
            name = rule.get("alert") or rule.get("record")
            where = f"{path}: {name}"
            check_names(where, rule["expr"], exported)
            if "alert" not in rule:
                continue
            if "for" not in rule:
                problems.append(f"{where}: no for:")
            if "severity" not in rule.get("labels", {}):
                problems.append(f"{where}: no severity label")
            for key in ("summary", "description"):
                if key not in rule.get("annotations", {}):
                    problems.append(f"{where}: no {key} annotation")


def panels_of(dash):
    for p in dash.get("panels", []):
        yield p
        yield from p.get("panels", [])  # a collapsed row's


def has_ds(obj):
    ds = obj.get("datasource")
    return isinstance(ds, dict) and ds.get("uid") == DS_UID


def check_templating(path, dash, exported):
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    ds = variables.get("DS_PROMETHEUS", {})
    if ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problems.append(f"{path}: no Prometheus datasource variable DS_PROMETHEUS")
    vol = variables.get("volume")
    if vol is None or vol.get("type") != "query" or not has_ds(vol):
        problems.append(f"{path}: no query variable volume on ${{DS_PROMETHEUS}}")
    else:
        check_names(f"{path}: variable volume", vol["definition"], exported)


def check_dashboard(path, exported, out):
    dash = json.load(open(path))
    check_templating(path, dash, exported)
    records = []
    for p in panels_of(dash):
        if p.get("type") == "row":
            continue
        where = f"{path}: panel {p['id']} ({p['title']})"
        targets = p.get("targets", [])
        if not has_ds(p):
            problems.append(f"{where}: no datasource ${{DS_PROMETHEUS}}")
        if not targets:
            problems.append(f"{where}: no target")
        for t in targets:
            if not has_ds(t) or not t.get("expr"):
                problems.append(f"{where}: target {t.get('refId')}: no datasource or expr")
                continue
            check_names(f"{where} {t['refId']}", t["expr"], exported)
            expr = t["expr"].replace("$__rate_interval", "5m")
            expr = expr.replace("$volume", ".+")
            records.append({"record": f"hhc_dashboard:panel{p['id']}_{t['refId']}",
                            "expr": expr})
    yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]},
                   open(out, "w"))


def main():
    metrics, rules, dashboard, out = sys.argv[1:]
    exported = exported_series(metrics)
    check_rules(rules, exported)
    check_dashboard(dashboard, exported, out)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
