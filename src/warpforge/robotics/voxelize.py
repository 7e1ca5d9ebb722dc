def voxelize(*a): raise NotImplementedError
