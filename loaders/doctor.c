// SPDX-License-Identifier: MIT
/* ipctrace-loader --doctor: the features found and how each probe would attach, as JSON. */
#include <stdint.h>
#include <stdio.h>
#include <bpf/btf.h>
#include "doctor.h"
#include "json.h"
#include "probes.h"

int doctor(const struct features *ft)
{
	struct probe_set ps;
	struct btf *btf = btf__load_vmlinux_btf();
	char err[256] = "";
	int rc;

	rc = probes_choose(&ps, NULL, ft, btf, NULL, err, sizeof(err));
	btf__free(btf);
	printf("{\"features\": ");
	features_json(ft, stdout);
	printf(",\n \"attach\": ");
	probes_json(&ps, stdout);
	printf(",\n \"possible\": %s, \"why_impossible\": ", !ft->why_impossible[0] && !rc ? "true" : "false");
	json_str(stdout, ft->why_impossible[0] ? ft->why_impossible : err, SIZE_MAX);
	printf("}\n");
	return !ft->why_impossible[0] && !rc ? 0 : 2;
}
