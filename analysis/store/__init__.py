"""Every file format of a results directory: reading with checks, writing atomically."""
