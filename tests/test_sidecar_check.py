"""Specification of the offline sidecar check: which requirement files build on which base-image pins."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tpuplane.infra.errors import ConfigError
from tpuplane.infra.pathways.sidecar_check import (
    MAX_INCLUDE_DEPTH, check_sidecar, image_environment, read_pins, read_requirement_file,
)

PINS = """\
    # exported server constraints
    absl-py==2.3.1
    cloudpickle==3.1.1
    foo-bar==1.0.0
    jax==0.10.0
    jaxlib==0.10.0
    numpy==2.1.1
    scipy==1.15.3
    """


@pytest.fixture
def write(tmp_path: Path):
    """Write a dedented file under tmp_path and return its path."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    return _write


@pytest.fixture
def constraints(write) -> Path:
    return write("server_constraints.txt", PINS)


@pytest.fixture
def check(write, constraints):
    """Check a requirements text against PINS on a python 3.12, JAX 0.10.0 image, in an empty environment."""

    def _check(requirements: str, *, python_version: str = "3.12", jax_version: str = "0.10.0",
               environ: dict[str, str] | None = None):
        path = write("requirements.txt", requirements)
        return check_sidecar(path, constraints, python_version=python_version, jax_version=jax_version,
                             environ=environ or {})

    return _check


def conflicting_packages(result) -> list[str]:
    return [conflict.package for conflict in result.conflicts]


def test_check_requirements_that_accept_every_pin_are_clean(check):
    result = check("numpy>=1.26,<2.3\nscipy\ncloudpickle>=3\ngrain>=0.2\n")
    assert result.ok
    assert result.conflicts == ()
    assert result.checked == 4


@pytest.mark.parametrize(
    "requirement",
    ["numpy==2.0.0", "numpy<2", "numpy>=2.2", "numpy!=2.1.1", "numpy~=2.0.0", "numpy>2.1.1", "numpy==2.2.*"],
)
def test_check_specifier_excluding_the_pin_is_a_conflict(check, requirement):
    assert conflicting_packages(check(requirement + "\n")) == ["numpy"]


@pytest.mark.parametrize(
    "requirement",
    ["numpy==2.1.1", "numpy>=2,<2.2", "numpy!=2.1.0", "numpy~=2.1", "numpy~=2.1.0", "numpy==2.1.*", "numpy<=2.1.1"],
)
def test_check_specifier_accepting_the_pin_is_clean(check, requirement):
    assert check(requirement + "\n").ok


def test_check_compatible_release_on_older_minor_is_a_conflict(check):
    assert conflicting_packages(check("scipy~=1.14.0\n")) == ["scipy"]


def test_check_unpinned_package_is_never_a_conflict(check):
    assert check("grain==0.0.1\n").ok


def test_check_marker_for_another_python_is_not_applied(check):
    result = check('numpy<2 ; python_version < "3.11"\n')
    assert result.ok
    assert (result.checked, result.not_for_image) == (0, 1)


def test_check_marker_evaluated_for_the_image_python_not_this_one(check):
    requirement = 'numpy<2 ; python_version < "3.11"\n'
    assert conflicting_packages(check(requirement, python_version="3.10")) == ["numpy"]


def test_check_marker_for_another_platform_is_not_applied(check):
    assert check('numpy<2 ; sys_platform == "darwin" or platform_machine == "arm64"\n').ok


def test_check_marker_matching_linux_x86_64_is_applied(check):
    requirement = 'numpy<2 ; sys_platform == "linux" and platform_machine == "x86_64"\n'
    assert conflicting_packages(check(requirement)) == ["numpy"]


def test_check_extras_and_spelling_are_normalised(check):
    result = check("Foo_Bar[extra,other]>=2\n")
    assert conflicting_packages(result) == ["foo-bar"]
    assert result.conflicts[0].requested == "Foo_Bar[extra,other]>=2"


def test_check_pin_spelling_is_normalised(write):
    constraints = write("pins.txt", "Ml_Dtypes==0.5.3\njax==0.10.0\njaxlib==0.10.0\n")
    requirements = write("req.txt", "ml.dtypes<0.5\n")
    result = check_sidecar(requirements, constraints, python_version="3.12", jax_version="0.10.0")
    assert conflicting_packages(result) == ["ml-dtypes"]


def test_check_include_is_relative_to_the_including_file(write, constraints):
    write("common/base.txt", "cloudpickle>=3\nnumpy<2\n")
    requirements = write("sidecar/requirements.txt", "-r ../common/base.txt\nscipy\n")
    result = check_sidecar(requirements, constraints, python_version="3.12", jax_version="0.10.0")
    assert conflicting_packages(result) == ["numpy"]
    assert result.conflicts[0].requested_at.endswith("common/base.txt:2")


def test_check_long_include_option_with_equals_sign(write, constraints):
    write("more.txt", "numpy<2\n")
    requirements = write("requirements.txt", "--requirement=more.txt\n")
    result = check_sidecar(requirements, constraints, python_version="3.12", jax_version="0.10.0")
    assert conflicting_packages(result) == ["numpy"]


def test_check_include_cycle_is_an_error(write, constraints):
    write("a.txt", "-r b.txt\n")
    write("b.txt", "numpy\n-r a.txt\n")
    requirements = write("requirements.txt", "-r a.txt\n")
    with pytest.raises(ConfigError, match=r"a\.txt -> .*b\.txt -> .*a\.txt"):
        check_sidecar(requirements, constraints, python_version="3.12", jax_version="0.10.0")


def test_check_diamond_include_is_read_once(write):
    write("shared.txt", "numpy\n")
    write("left.txt", "-r shared.txt\n")
    write("right.txt", "-r shared.txt\n")
    parsed = read_requirement_file(write("requirements.txt", "-r left.txt\n-r right.txt\n"))
    assert [entry.text for entry in parsed.requirements] == ["numpy"]


def test_check_user_constraint_file_contradicting_a_pin_is_a_conflict(write, constraints):
    write("user-constraints.txt", "numpy<2\n")
    requirements = write("requirements.txt", "-c user-constraints.txt\nscipy\n")
    result = check_sidecar(requirements, constraints, python_version="3.12", jax_version="0.10.0")
    assert conflicting_packages(result) == ["numpy"]
    assert result.conflicts[0].requested_at.endswith("user-constraints.txt:1")


def test_check_comments_blank_lines_and_continuations(check):
    result = check(
        """\
        # a comment line

        scipy  # an inline comment
        numpy>=1.0,\\
            <2  # the spec continues on this line
        cloudpickle
        """
    )
    assert conflicting_packages(result) == ["numpy"]
    assert result.conflicts[0].requested == "numpy>=1.0,    <2"
    assert result.conflicts[0].requested_at.endswith("requirements.txt:4")
    assert result.checked == 3


def test_check_hash_options_do_not_hide_the_version(check):
    result = check("numpy==2.0.0 --hash=sha256:0123abcd --hash=sha256:4567ef\n")
    assert conflicting_packages(result) == ["numpy"]


def test_check_index_options_are_accepted(check):
    assert check("--index-url https://example.invalid/simple\n--pre\n-f ./wheels\nnumpy\n").ok


@pytest.mark.parametrize(
    "line",
    [
        "git+https://example.invalid/org/pkg.git@v1#egg=pkg",
        "https://example.invalid/pkg-1.0-py3-none-any.whl",
        "./vendor/pkg",
        "numpy @ https://example.invalid/numpy-1.0-cp312-cp312-linux_x86_64.whl",
        "-e ./vendor/pkg",
        "-r https://example.invalid/requirements.txt",
    ],
)
def test_check_location_lines_are_reported_not_checked(check, line):
    result = check(line + "\n")
    assert result.ok
    assert len(result.notices) == 1
    notice = result.notices[0]
    assert notice.text == line
    assert "not checked" in str(notice) and "requirements.txt:1" in str(notice)


@pytest.mark.parametrize("line", ["numpy>>2", "numpy[", "--no-such-option x", "-r"])
def test_check_malformed_line_is_an_error_naming_file_and_line(check, line):
    with pytest.raises(ConfigError, match=r"requirements\.txt:2"):
        check("scipy\n" + line + "\n")


def test_check_missing_requirements_file_is_an_error(tmp_path, constraints):
    with pytest.raises(ConfigError, match="a readable UTF-8 file"):
        check_sidecar(tmp_path / "absent.txt", constraints, python_version="3.12", jax_version="0.10.0")


def test_check_client_jax_other_than_pinned_conflicts_on_jax_and_jaxlib(check):
    result = check("numpy\n", jax_version="0.10.2")
    assert conflicting_packages(result) == ["jax", "jaxlib"]
    assert all(conflict.requested_at == "the base image's JAX" for conflict in result.conflicts)


def test_check_client_jax_equal_to_pins_is_clean(check):
    assert check("numpy\n", jax_version="0.10.0").ok


def test_check_jaxlib_pinned_apart_from_jax_conflicts_with_the_client(write):
    constraints = write("pins.txt", "jax==0.10.0\njaxlib==0.9.2\n")
    requirements = write("req.txt", "\n")
    result = check_sidecar(requirements, constraints, python_version="3.12", jax_version="0.10.0")
    assert conflicting_packages(result) == ["jaxlib"]


def test_check_lock_step_package_left_unpinned_is_a_conflict(write):
    constraints = write("pins.txt", "jax==0.10.0\n")
    requirements = write("req.txt", "numpy\n")
    result = check_sidecar(requirements, constraints, python_version="3.12", jax_version="0.10.0")
    assert conflicting_packages(result) == ["jaxlib"]
    assert "pin no version" in str(result.conflicts[0])


def test_check_invalid_client_jax_version_is_an_error(check):
    with pytest.raises(ConfigError, match="base image's JAX: got 'latest'"):
        check("numpy\n", jax_version="latest")


def test_check_lock_step_applies_without_any_client_version(check):
    """The image's own JAX always binds the constraints: pins of another JAX mean the wrong constraints file."""
    result = check("numpy\n", jax_version="0.6.2")
    assert conflicting_packages(result) == ["jax", "jaxlib"]
    assert "jax==0.10.0" in str(result.conflicts[0]) and "'jax==0.6.2'" in str(result.conflicts[0])


def test_check_lock_step_conflict_names_where_the_version_came_from(write, constraints):
    requirements = write("req.txt", "numpy\n")
    result = check_sidecar(requirements, constraints, python_version="3.12", jax_version="0.10.2",
                           jax_source="client --jax-version")
    assert [conflict.requested_at for conflict in result.conflicts] == ["client --jax-version"] * 2


# ---- the user's own specifiers, for packages the base image does not pin ------------------------------------------


@pytest.mark.parametrize("first, second", [
    ("grain>=2", "grain<1"),
    ("grain>=1", "grain<1"),
    ("grain>1", "grain<=1"),
    ("grain==0.5", "grain>=1"),
    ("grain==0.5", "grain!=0.5"),
    ("grain==0.5", "grain==0.6"),
    ("grain~=1.4", "grain>=2"),
    ("grain~=1.4.2", "grain>=1.5"),
    ("grain==1.0", "grain==2.*"),
])
def test_check_own_specifiers_admitting_no_version_are_a_conflict(check, first, second):
    result = check(f"{first}\n{second}\n")
    (conflict,) = result.conflicts
    assert (conflict.package, conflict.requested, conflict.requested_at.rsplit("/", 1)[1]) == (
        "grain", second, "requirements.txt:2")
    assert f"{first!r} (" in str(conflict) and "requirements.txt:1) leaves no version both accept" in str(conflict)


@pytest.mark.parametrize("specs", [
    ("grain>=1", "grain<=1"),
    ("grain>=1", "grain<2", "grain!=1.5"),
    ("grain~=1.4", "grain<1.9"),
    ("grain==1.5", "grain>=1,<2"),
    ("grain>=1", "grain>=2"),
    ("grain!=1", "grain!=2"),
])
def test_check_own_specifiers_that_leave_a_version_are_clean(check, specs):
    assert check("\n".join(specs) + "\n").ok


def test_check_own_specifier_contradicting_a_user_constraint_file(write, constraints):
    write("team-constraints.txt", "grain<1\n")
    requirements = write("requirements.txt", "-c team-constraints.txt\ngrain>=2\n")
    (conflict,) = check_sidecar(requirements, constraints, python_version="3.12", jax_version="0.10.0").conflicts
    assert conflict.requested_at.endswith("team-constraints.txt:1") or conflict.requested_at.endswith(
        "requirements.txt:2")
    assert "team-constraints.txt:1" in str(conflict) and "requirements.txt:2" in str(conflict)


def test_check_one_line_admitting_no_version_is_a_conflict(check):
    (conflict,) = check("grain>=2,<1\n").conflicts
    assert "its own specifiers admit no version" in str(conflict)


def test_check_own_contradiction_in_another_marker_branch_is_not_applied(check):
    assert check('grain>=2\ngrain<1 ; python_version < "3.11"\n').ok


# ---- pip's reading rules -------------------------------------------------------------------------------------------


def test_check_reads_a_file_with_a_utf8_byte_order_mark(tmp_path, constraints):
    requirements = tmp_path / "requirements.txt"
    requirements.write_bytes("\ufeffnumpy<2\n".encode())
    result = check_sidecar(requirements, constraints, python_version="3.12", jax_version="0.10.0")
    assert [conflict.requested for conflict in result.conflicts] == ["numpy<2"]


def test_check_expands_environment_variables_like_pip(check):
    result = check("numpy==${NUMPY_VERSION}\n", environ={"NUMPY_VERSION": "2.0.0"})
    assert conflicting_packages(result) == ["numpy"]
    (notice,) = result.notices
    assert "${NUMPY_VERSION}" in notice.text and "from this environment" in notice.reason


def test_check_leaves_an_unset_variable_as_written_and_says_so(check):
    with pytest.raises(ConfigError, match=r"requirements\.txt:1.*\$\{NUMPY_VERSION\}.*not set"):
        check("numpy==${NUMPY_VERSION}\n")


def test_check_reports_an_unset_variable_in_a_line_that_still_parses(check):
    result = check("--index-url https://${INDEX_HOST}/simple\nnumpy\n")
    assert result.ok
    (notice,) = result.notices
    assert "${INDEX_HOST} is not set" in notice.reason


def test_check_lowercase_dollar_braces_are_not_variables(check):
    with pytest.raises(ConfigError):
        check("numpy==${numpy}\n", environ={"numpy": "2.1.1"})


def test_check_inline_comment_ending_in_backslash_swallows_the_next_line(check):
    """pip joins continuations before cutting comments, so the next line becomes part of the comment."""
    result = check("scipy  # pinned by the image \\\nnumpy<2\ncloudpickle\n")
    assert result.ok
    assert result.checked == 2
    (notice,) = result.notices
    assert (notice.origin.line, notice.text) == (2, "numpy<2")
    assert "comment of line 1" in notice.reason


def test_check_whole_line_comment_ending_in_backslash_does_not_continue(check):
    result = check("# a comment \\\nnumpy<2\n")
    assert conflicting_packages(result) == ["numpy"]
    assert result.conflicts[0].requested_at.endswith("requirements.txt:2")


def test_check_continuation_ended_by_a_comment_line(check):
    result = check("numpy>=1,\\\n# the comment ends the requirement\nscipy\n")
    assert result.ok and result.checked == 2


# ---- credentials never shown --------------------------------------------------------------------------------------


@pytest.mark.parametrize("line", [
    "git+https://deploy:s3cr3t-token@git.example.invalid/org/pkg.git@v1#egg=pkg",
    "pkg @ https://deploy:s3cr3t-token@files.example.invalid/pkg-1.0-py3-none-any.whl",
    "-r https://deploy:s3cr3t-token@files.example.invalid/requirements.txt",
])
def test_check_notices_redact_url_credentials(check, line):
    (notice,) = check(line + "\n").notices
    assert "s3cr3t-token" not in str(notice) and "deploy" not in str(notice)
    assert "https://***@" in str(notice)


def test_check_errors_redact_url_credentials(check):
    with pytest.raises(ConfigError) as raised:
        check("--no-such-option https://deploy:s3cr3t-token@host.invalid/simple\n")
    assert "s3cr3t-token" not in str(raised.value)


def test_check_notices_show_variables_unexpanded(check):
    result = check("--extra-index-url https://${INDEX_TOKEN}@host.invalid/simple\nnumpy\n",
                   environ={"INDEX_TOKEN": "s3cr3t-token"})
    assert result.ok
    assert all("s3cr3t-token" not in str(notice) for notice in result.notices)


def test_conflict_is_one_line_naming_package_spec_pin_and_both_places(check):
    (conflict,) = check("scipy\nnumpy<2\n").conflicts
    line = str(conflict)
    assert "\n" not in line
    for part in ("numpy", "'numpy<2'", "numpy==2.1.1", "requirements.txt:2", "server_constraints.txt:7"):
        assert part in line


def test_raise_for_conflicts_gives_one_problem_per_conflict(check):
    result = check("numpy<2\nscipy<1\n")
    with pytest.raises(ConfigError) as raised:
        result.raise_for_conflicts()
    assert [problem.given for problem in raised.value.problems] == ["numpy<2", "scipy<1"]
    assert len(str(raised.value).splitlines()) == 2


def test_raise_for_conflicts_is_silent_when_clean(check):
    check("numpy\n").raise_for_conflicts()


def test_pins_skip_markers_that_do_not_apply_to_the_image(write):
    constraints = write(
        "pins.txt",
        """\
        numpy==2.1.1 ; python_version >= "3.11"
        numpy==1.26.4 ; python_version < "3.11"
        """,
    )
    pins = read_pins(constraints, image_environment("3.10"))
    assert str(pins.by_name["numpy"].version) == "1.26.4"


def test_pins_that_are_not_exact_become_notices(write):
    constraints = write("pins.txt", "numpy>=2\nscipy==1.15.*\njax==0.10.0\n")
    pins = read_pins(constraints, image_environment("3.12"))
    assert list(pins.by_name) == ["jax"]
    assert [notice.text for notice in pins.notices] == ["numpy>=2", "scipy==1.15.*"]


def test_pins_contradicting_each_other_are_an_error(write):
    constraints = write("pins.txt", "numpy==2.1.1\nNumPy==2.0.0\n")
    with pytest.raises(ConfigError, match=r"pins\.txt:2"):
        read_pins(constraints, image_environment("3.12"))


def test_shipped_example_requirements_fit_the_shipped_example_constraints():
    sidecar = Path(__file__).resolve().parent.parent / "sidecar"
    result = check_sidecar(
        sidecar / "requirements.txt",
        sidecar / "constraints.example.txt",
        python_version="3.12",
        jax_version="0.10.0",
    )
    assert result.ok, [str(conflict) for conflict in result.conflicts]
    assert result.notices == ()


# ---- hostile or odd input: one clear error, never a traceback, never the file's text ------------------------------


def test_check_undefined_marker_comparison_is_a_config_error(check):
    with pytest.raises(ConfigError, match=r"requirements\.txt:1.*a marker whose comparisons are defined"):
        check('numpy ; python_version ~= "abc"\n')


def test_check_long_include_chain_is_refused(tmp_path, constraints):
    for i in range(600):
        (tmp_path / f"r{i}.txt").write_text(f"-r r{i + 1}.txt\n")
    (tmp_path / "r600.txt").write_text("numpy\n")
    with pytest.raises(ConfigError, match=f"at most {MAX_INCLUDE_DEPTH}"):
        check_sidecar(tmp_path / "r0.txt", constraints, python_version="3.12", jax_version="0.10.0", environ={})


def test_check_version_with_thousands_of_digits_is_refused(check):
    with pytest.raises(ConfigError, match="at most 18 digits"):
        check("numpy==" + "1" * 5000 + "\n")


def test_check_marker_on_the_unknown_kernel_release_is_checked_as_possibly_true(check):
    (conflict,) = check('numpy<2 ; platform_release >= "5.0"\n').conflicts
    assert conflict.package == "numpy"


def test_check_marker_false_whatever_the_kernel_release_is_skipped(check):
    result = check('numpy<2 ; sys_platform == "win32" and platform_release >= "5.0"\n')
    assert result.ok and result.not_for_image == 1


def test_check_error_never_quotes_a_line_that_is_not_a_requirement(check):
    with pytest.raises(ConfigError) as raised:
        check("AWS_SECRET_ACCESS_KEY=SECRETPART/xyz+abc\n")
    assert "SECRETPART" not in str(raised.value)


def test_check_url_userinfo_with_at_signs_and_token_params_are_masked(check):
    (notice,) = check("pkg @ https://user:p@ss-SECRETPART@host.invalid/pkg.whl?token=SECRETPART2\n").notices
    assert "SECRETPART" not in str(notice) and "https://***@host.invalid" in str(notice)
