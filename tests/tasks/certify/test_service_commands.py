"""tasks/certify/service.py's command services: plan_environments and certify refuse with named errors."""

from __future__ import annotations

import pytest

from benchcert.tasks.certify.service import (CertifyRequest, EnvironmentPlanRequest, certify, plan_environments,
                                             plan_id_of)
from benchcert.tasks.errors import MissingStoreError, UsageError

from conftest import DATA

ENVS = DATA / "mmlu_pro" / "environments.toml"


def test_plan_id_of_reads_a_manifest_or_refuses(tmp_path):
    assert plan_id_of("env-abc") == "env-abc"
    good = tmp_path / "p.json"
    good.write_text('{"plan_id": "env-123"}')
    assert plan_id_of(str(good)) == "env-123"
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    with pytest.raises(UsageError, match="not a plan manifest"):
        plan_id_of(str(bad))


def test_requests_refuse_in_the_documented_order(tmp_path):
    none = tmp_path / "none.duckdb"
    req = EnvironmentPlanRequest(envs=ENVS, db=none, benchmark="b", epsilon=1.5, delta=0.1)
    with pytest.raises(UsageError, match="--epsilon must be in"):
        plan_environments(req)
    with pytest.raises(UsageError, match="--seed must be in"):
        plan_environments(EnvironmentPlanRequest(envs=ENVS, db=none, benchmark="b", epsilon=0.1, delta=0.1, seed=-1))
    with pytest.raises(UsageError, match="cannot read the environments file"):
        plan_environments(EnvironmentPlanRequest(envs=tmp_path / "x.toml", db=none, benchmark="b", epsilon=0.1,
                                                 delta=0.1))
    with pytest.raises(MissingStoreError, match="no such store"):
        plan_environments(EnvironmentPlanRequest(envs=ENVS, db=none, benchmark="b", epsilon=0.1, delta=0.1))
    with pytest.raises(UsageError, match="--delta must be in"):
        certify(CertifyRequest(envs=ENVS, db=none, benchmark="b", delta=2.0))
    with pytest.raises(MissingStoreError, match="no such store"):
        certify(CertifyRequest(envs=ENVS, db=none, benchmark="b"))


def test_the_parser_offers_exactly_the_service_protocols():
    # flows/cli/certify.py spells the choices out so that building the parser imports no numerics.
    from benchcert.flows.cli.certify import PROTOCOL_CHOICES
    from benchcert.tasks.certify.service import PROTOCOLS

    assert PROTOCOL_CHOICES == tuple(PROTOCOLS)
