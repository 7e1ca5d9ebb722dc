"""Robotics data ops: trajectory resampling, N-stream sensor alignment, point-cloud voxelization.

The functions share their modules' names, so they are imported here eagerly: importing a
submodule binds the module onto the package, and the function must win. These modules import
only torch and warpforge; Triton loads on the first kernel launch.
"""

from __future__ import annotations

from warpforge.robotics.align import align
from warpforge.robotics.resample import resample
from warpforge.robotics.voxelize import voxelize

__all__ = ["align", "resample", "voxelize"]
