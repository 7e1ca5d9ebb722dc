"""`warpforge.ops.<name>` is the public function even after its same-named module is imported."""

from __future__ import annotations

import importlib
import types

import warpforge.ops


def test_op_names_stay_functions_after_submodule_import():
    module = importlib.import_module("warpforge.ops.cross_entropy")
    importlib.import_module("warpforge.ops.rope")
    assert isinstance(module, types.ModuleType)
    assert warpforge.ops.cross_entropy is module.cross_entropy
    assert callable(warpforge.ops.rope) and not isinstance(warpforge.ops.rope, types.ModuleType)
    assert "cross_entropy" in dir(warpforge.ops)
