/* SPDX-License-Identifier: MIT */
#ifndef IPCTRACE_DOCTOR_H
#define IPCTRACE_DOCTOR_H
#include "features.h"

/* Prints the --doctor JSON; 0 when tracing is possible here, else 2. */
int doctor(const struct features *ft);

#endif
