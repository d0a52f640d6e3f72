"""The fast lane stays fast: every test that needs a service, starts a process or opens resplot's
window is marked ``integration`` (tests/lanes.py), so `scripts/test.sh -m "not integration"`
leaves it out. Runs in the fast lane itself, reading the suite's files (no test is run)."""

from __future__ import annotations

import textwrap

from tests.lanes import INTEGRATION_FIXTURES, unmarked_starters

pytest_plugins = ["pytester"]


def test_every_test_that_starts_a_process_or_opens_the_window_is_marked():
    unmarked = unmarked_starters()
    assert not unmarked, "\n".join(map(str, unmarked))


def _write(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_the_check_names_a_test_starting_a_process_through_a_helper_a_fixture_or_a_param(
    tmp_path,
):
    suite = tmp_path / "suite"
    _write(
        suite,
        {
            "__init__.py": "",
            "helpers.py": """
                import subprocess

                def child():
                    return subprocess.run(["true"], check=True)
            """,
            "conftest.py": """
                import pytest
                from suite.helpers import child

                @pytest.fixture
                def started():
                    child()
            """,
            "deep/test_kinds.py": """
                import pytest
                from suite import helpers

                def test_plain():
                    assert 1 + 1 == 2

                def test_through_a_helper():
                    helpers.child()

                def test_through_a_fixture(started):
                    pass

                @pytest.mark.integration
                def test_marked():
                    helpers.child()

                def test_a_service(sshd_env):
                    helpers.child()
            """,
            "test_params.py": """
                import pytest

                @pytest.fixture(params=["sqlite", "postgres"])
                def any_store(request):
                    return request.getfixturevalue("pg_store")

                @pytest.fixture(
                    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
                )
                def marked_store(request):
                    return request.getfixturevalue("pg_store")

                def test_an_unmarked_param(any_store):
                    pass

                def test_a_marked_param(marked_store):
                    pass
            """,
            "test_marked_file.py": """
                import pytest
                from suite.helpers import child

                pytestmark = [pytest.mark.integration]

                def test_in_a_marked_file():
                    child()
            """,
        },
    )
    found = {(u.path.name, u.test): u.why for u in unmarked_starters(suite)}
    assert set(found) == {
        ("test_kinds.py", "test_through_a_helper"),
        ("test_kinds.py", "test_through_a_fixture"),
        ("test_params.py", "test_an_unmarked_param"),
    }
    assert "subprocess.run" in found[("test_kinds.py", "test_through_a_helper")]
    assert found[("test_kinds.py", "test_through_a_fixture")].startswith("uses fixture started")
    assert (
        "asks for pg_store through getfixturevalue"
        in found[("test_params.py", "test_an_unmarked_param")]
    )


def test_a_test_using_a_service_fixture_is_left_out_of_the_fast_lane(pytester):
    conftest = ["import pytest", "from tests.lanes import mark_integration"]
    tests = ["import pytest", "def test_fast():\n    pass"]
    for name in sorted(INTEGRATION_FIXTURES):
        conftest += [
            f"@pytest.fixture\ndef {name}():\n    return 'a service'",
            f"@pytest.fixture\ndef through_{name}({name}):\n    return {name}",
        ]
        tests += [
            f"def test_direct_{name}({name}):\n    pass",
            f"def test_indirect_{name}(through_{name}):\n    pass",
        ]
    conftest.append("def pytest_collection_modifyitems(items):\n    mark_integration(items)")
    tests.append("@pytest.mark.postgres\ndef test_marked_postgres():\n    pass")
    pytester.makeconftest("\n\n".join(conftest))
    pytester.makepyfile(test_lane="\n\n".join(tests))

    fast = pytester.inline_run("-m", "not integration", "-p", "no:cacheprovider")
    passed = [r.nodeid.split("::")[-1] for r in fast.getreports("pytest_runtest_logreport")]
    assert set(passed) == {"test_fast"}
    fast.assertoutcome(passed=1)
    integration = pytester.inline_run("-m", "integration", "-p", "no:cacheprovider")
    integration.assertoutcome(passed=2 * len(INTEGRATION_FIXTURES) + 1)
