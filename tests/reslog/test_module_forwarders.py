"""reslog's wandb-style module functions are the current run's methods, signature and docs too."""

from __future__ import annotations

import inspect

import pytest

import reslog
from reslog.training.run import Run

FORWARDED = ("log", "define_metric", "watch", "unwatch", "save", "log_artifact", "mark_preempting")


@pytest.mark.parametrize("name", FORWARDED)
def test_module_function_shows_the_run_methods_signature_and_docstring(name):
    function = getattr(reslog, name)
    method = inspect.signature(getattr(Run, name))
    assert inspect.signature(function) == method.replace(
        parameters=list(method.parameters.values())[1:]
    )
    assert inspect.cleandoc(getattr(Run, name).__doc__ or "") in function.__doc__
    assert function.__module__ == "reslog" and function.__name__ == name
    assert name in dir(reslog) and name in reslog.__all__


@pytest.mark.parametrize("name", FORWARDED)
def test_module_function_without_a_run_raises_the_same_error(name):
    assert reslog.current() is None
    with pytest.raises(
        RuntimeError, match=r"^reslog: no active run; call reslog\.init\(\.\.\.\) first$"
    ):
        getattr(reslog, name)({"x": 1.0} if name == "log" else "x")


def test_module_functions_act_on_the_current_run(tmp_path):
    store = tmp_path / "reslog.db"
    reslog.init(project="p", name="forwarded", store=str(store), system=False)
    try:
        reslog.log({"loss": 2.0}, step=3)
        reslog.log({"loss": 1.5})
    finally:
        reslog.finish()
    with reslog.open(store) as reader:
        history = reader.history("forwarded", "loss")
    assert list(zip(history["step"], history["last"], strict=True)) == [(3, 2.0), (4, 1.5)]
