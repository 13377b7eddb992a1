"""Claim logic on synthetic metrics."""

from neurips26.bip import experiment as E
from neurips26.harness.paper import SeedMetrics


def _m(rc=0, b2=0.16, ratio=12.0, res=1e-13, acc=1.0, same=True):
    return {"repulsion": {"real_collisions": rc, "virtual_collisions": 0, "max_residual": res,
                          "min_acceptance": acc},
            "baselines": {"b2": {"real_collision_rate": b2}, "b1": {"mean_residual": 0.5},
                          "b5": {"mean_residual": 1.0}},
            "robustness": {"repulsion": {"ratio": ratio, "hit_virtual": 0.05, "hit_real": 0.18}},
            "capacity": {"lower": 2.3e4, "M": 12000},
            "sharded": {"shards": 2, "n": 3000, "main_audit": {"real_collisions": rc, "virtual_collisions": 0},
                        "main_audit_equal": True, "equal_to_one_shard": same,
                        "audit": {"real_collisions": 0, "virtual_collisions": 0}}}


def _claims(ms):
    seen = SeedMetrics(list(range(len(ms))), ms)
    return {c.id: c.evaluate(seen).verdict for c in E.CLAIMS}


def test_claims_hold_fail_inconclusive():
    v = _claims([_m(b2=0.16), _m(b2=0.17), _m(b2=0.15)])
    assert v["zero_collisions"] == "holds" and v["realizable_residual"] == "holds"
    assert v["acceptance_up_to_4N"] == "holds" and v["enrollment_robustness"] == "holds"
    assert v["gap_capacity"] == "holds" and v["gapgen_curriculum"] == "inconclusive"
    assert _claims([_m(rc=1), _m(), _m()])["zero_collisions"] == "fails"
    assert _claims([_m(same=False), _m(), _m()])["zero_collisions"] == "fails"   # 2 shards != 1 shard
    assert _claims([_m(ratio=2.0), _m(ratio=2.5), _m(ratio=2.2)])["enrollment_robustness"] == "fails"
    assert _claims([_m(ratio=5.1), _m(ratio=4.9)])["enrollment_robustness"] == "inconclusive"
    assert _claims([_m(acc=0.5), _m(), _m()])["acceptance_up_to_4N"] == "fails"
    assert _claims([_m()])["zero_collisions"] == "inconclusive"      # one seed: no s.e.


def _img(ic_c, ic_0, coll=0):
    return {"gapgen": {"curriculum": {"ic": ic_c, "collisions": {"count": coll, "n": 800, "virtuals": coll,
                                                                 "rate": coll / 800},
                                      "provisioned": {"collisions": 0, "rejected": coll, "draws": 800 + coll,
                                                      "retired": 0}},
                       "stage0": {"ic": ic_0, "collisions": {"count": 50, "n": 800, "virtuals": 30}},
                       "curriculum_at_b2": {"count": 150, "n": 800}, "unseen_real_images": {"rate": 0.05}}}


def test_gapgen_claim_from_paired_consistency_and_collisions():
    def v(rows):
        return _claims([_m() | {"image": r} for r in rows])["gapgen_curriculum"]
    assert v([_img(0.95, 0.87), _img(0.96, 0.86), _img(0.95, 0.88)]) == "holds"
    assert v([_img(0.95, 0.87, coll=1), _img(0.96, 0.86), _img(0.95, 0.88)]) == "fails"
    assert v([_img(0.80, 0.87), _img(0.81, 0.86), _img(0.79, 0.88)]) == "fails"
    assert v([_img(0.90, 0.87), _img(0.85, 0.88), _img(0.88, 0.88)]) == "inconclusive"
    assert v([_img(0.95, 0.87)]) == "inconclusive"                     # one seed: no s.e.
    cut = _img(0.95, 0.87, coll=3) | {"budget": {"cut": True, "training_cut": True}}
    assert v([cut, _img(0.96, 0.86, coll=3), _img(0.95, 0.88)]) == "inconclusive"   # training was cut


def test_gapgen_claim_reports_the_tail_draw_without_judging_it():
    """``curriculum_tail`` (k_tail images per virtual) is reported in the claim's text (rate, the expected raw
    count rate x n, the raw images' margin to tau_c) and does not move the verdict."""
    def tailed(rate, margin, coll=0):
        r = _img(0.95, 0.87, coll=coll)
        r["gapgen"]["curriculum_tail"] = {"rate": rate, "k": 32, "raw_margin": margin}
        return _m() | {"image": r}
    seen = SeedMetrics([0, 1, 2], [tailed(0.01, 0.02), tailed(0.0, 0.03), tailed(5e-4, 0.011)])
    c = next(c for c in E.CLAIMS if c.id == "gapgen_curriculum").evaluate(seen)
    assert c.verdict == "holds"                                   # a tail rate of 1% is not a raw collision
    assert "rate 1.000%, 0.000%, 0.050% per seed, expected raw count 8.00, 0.00, 0.40" in c.measured
    assert "margin tau_c - max maxcos of the raw images 0.02, 0.03, 0.011" in c.measured
    seen = SeedMetrics([0, 1, 2], [tailed(0.0, -0.01, coll=1), tailed(0.0, 0.03), tailed(0.0, 0.011)])
    assert next(c for c in E.CLAIMS if c.id == "gapgen_curriculum").evaluate(seen).verdict == "fails"
