def test_select_problems_accepts_comma_separated_globs():
    from types import SimpleNamespace

    from warpforge.harness.bench import select_problems

    problems = [SimpleNamespace(name=n) for n in ("rms_norm.fwd", "softmax.fwd", "rope.bwd")]
    chosen = select_problems(problems, "rms*, rope*")
    assert [p.name for p in chosen] == ["rms_norm.fwd", "rope.bwd"]
