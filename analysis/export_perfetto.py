"""`ipctrace export DIR --perfetto`: the hook analysis/cmd_export.py looks for."""
from analysis import perfetto

HELP = "trace.perfetto.json: Chrome trace-event JSON for the Perfetto UI (traced runs)"


def export(resdir):
    return [perfetto.write(resdir)]
