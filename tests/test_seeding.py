"""Deterministic grades (issue 43, item 5): hidden inputs come from a seed fixed by the course's
grading secret, the assignment, the learner and the test (autograder.judge.seeding). A regrade
draws the same inputs whatever order the tests run in; another learner, or another course,
draws others; the inputs a judge names (the visible test's, the contract's edges) are always
among them."""
from __future__ import annotations

import stat

import numpy as np
import pytest

from autograder import judge
from autograder.judge import seeding

JUDGE = '''
DRAWN = {}

def test_a(k):
    DRAWN.setdefault("test_a", []).append(k.rng.normal(size=4).tolist())

def test_b(k):
    DRAWN.setdefault("test_b", []).append(k.cases(lambda r: int(r.integers(0, 10**9)), 3, always=[0, 7]))
'''


def _draws(folder, key, order=("test_a", "test_b"), threads=None):
    judge.run_judge(folder, kernel=judge.Kernel(channel=object(), key=key), grade_ids=list(order), threads=threads)
    module = judge.load_judge(folder / "judge.py")
    drawn = {g: v.pop() for g, v in module.DRAWN.items()}
    return drawn


def test_the_secret_is_made_once_owner_only_and_kept(tmp_path):
    path = seeding.secret_path(tmp_path, "")
    assert path == tmp_path / ".course" / seeding.SECRET_FILE
    first = seeding.course_secret(path)
    assert len(first) >= 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert seeding.course_secret(path) == first  # read back, not made again
    assert seeding.course_secret(seeding.secret_path(tmp_path, str(tmp_path / "state"))) != first


def test_a_regrade_draws_the_same_inputs_in_any_order(tmp_path):
    (tmp_path / "judge.py").write_text(JUDGE)
    key = seeding.submission_key(b"s" * 64, "05_shapes", "ada")
    first = _draws(tmp_path, key)
    assert _draws(tmp_path, key) == first
    assert _draws(tmp_path, key, order=("test_b", "test_a"), threads=2) == first  # each test its own seed
    assert first["test_b"][:2] == [0, 7] and len(first["test_b"]) == 5  # named inputs first, always
    other_learner = _draws(tmp_path, seeding.submission_key(b"s" * 64, "05_shapes", "grace"))
    other_course = _draws(tmp_path, seeding.submission_key(b"t" * 64, "05_shapes", "ada"))
    assert other_learner["test_a"] != first["test_a"] and other_course["test_a"] != first["test_a"]
    assert other_learner["test_b"][:2] == [0, 7]
    assert _draws(tmp_path, None)["test_a"] != _draws(tmp_path, None)["test_a"]  # no key: afresh


def test_the_step_keys_each_learner_under_the_courses_secret(tmp_path):
    """The grading step's key: the learner is the folder above the assignment's (nbgrader's
    submitted/<learner>/<assignment>/), the secret the course state's."""
    from autograder.common.settings import Settings

    source = tmp_path / "solutions" / "05_shapes"
    source.mkdir(parents=True)
    settings = Settings.load({"COURSE_STATE": str(tmp_path / "state")})
    step = judge.JudgeStep(source, settings=settings, learner=seeding.learner_of(
        tmp_path / "submitted" / "ada" / "05_shapes" / "05_shapes.ipynb"))
    assert step.learner == "ada"
    key = step.key()
    assert key == judge.JudgeStep(source, settings=settings, learner="ada").key()
    assert key != judge.JudgeStep(source, settings=settings, learner="grace").key()
    assert (tmp_path / "state" / seeding.SECRET_FILE).is_file()
    assert judge.JudgeStep(source, settings=settings).key() is None  # no learner named: fresh draws
    seeds = {seeding.seed_for(key, g) for g in ("test_a", "test_b")}
    assert len(seeds) == 2 and all(0 <= s < 2**128 for s in seeds)
    assert np.random.default_rng(seeding.seed_for(key, "test_a")).integers(0, 2**62) == \
        np.random.default_rng(seeding.seed_for(key, "test_a")).integers(0, 2**62)


# Right for odd widths only: the centred window's last entry, one past the window for an even
# width, is taken into each range (the judge draws the width, odd or even: a borderline answer).
EVEN_WIDTH_PADDING_BUG = '''
def window_range(x, width):
    half = width // 2

    def one(_, start):
        window = jax.lax.dynamic_slice(x, (start,), (width,))
        end = jax.lax.dynamic_slice(x, (jnp.minimum(start + 2 * half, x.shape[0] - 1),), (1,))
        both = jnp.concatenate([window, end])
        return None, jnp.max(both) - jnp.min(both)

    return jax.lax.scan(one, None, jnp.arange(x.shape[0] - width + 1))[1]
'''


@pytest.mark.notebook
def test_the_same_submission_graded_again_gets_the_same_verdicts(tmp_path):
    from conftest import fill_answers, run_grader, solution_notebook

    a = "05_shapes"
    path = fill_answers(solution_notebook(a), {"window_range": EVEN_WIDTH_PADDING_BUG},
                        tmp_path / "ada" / a / f"{a}.ipynb")
    results, stderr, code = run_grader([path, path, path], "--jobs", "2")
    assert code == 0, stderr[-3000:]
    verdicts = [[(t["grade_id"], t["points"], t["feedback"]) for t in r["tests"]] for r in results]
    assert verdicts[0] == verdicts[1] == verdicts[2]
    assert sum(t[1] for t in verdicts[0]) > 0  # the rest of the notebook is the solution's
