"""Running a workload under the tracer: options, the child processes, progress, clean-up."""
