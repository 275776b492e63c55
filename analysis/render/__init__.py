"""What a person reads: text tables, plots, flame graphs, Perfetto traces, HTML pages."""
