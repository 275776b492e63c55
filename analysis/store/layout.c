/*
 * The layouts and constants the analysis shares with the C side, as the compiler sees them:
 * the records of events.bin and iterations.bin (bpf/ipctrace.h, workloads/iterfile.h), the
 * argument structs of decode.c's and timeline.c's passes (decode.h, analysis/model/timeline.h),
 * the flags of the records' fields and the files' magics. analysis/store/clib.py reads these
 * tables when it loads the library: it builds the passes' ctypes structures from them and
 * refuses to go on where analysis/store/records.py (the files' dtypes and magics, the flags)
 * says otherwise (tests/unit/store/test_layout.py).
 *
 * Each struct's fields are listed once here, in order; offsets, sizes and types come from the
 * headers. A field a header gains and this list lacks stops the build: the fields listed must
 * fill the struct (the structs have no padding).
 */
#include <stddef.h>
#include <stdint.h>

#include "decode.h"
#include "ipctrace.h"
#include "iterfile.h"
#include "../model/timeline.h"

struct ipt_field {
	const char *layout;     /* the struct's name */
	const char *name;       /* NULL: the table's end */
	uint32_t offset, size;  /* size: the field's whole size (an array's all elements) */
	uint32_t depth;         /* 0 a value or an array of them, 1 a pointer to values, 2 to pointers */
	char kind;              /* the value's: 'i' signed, 'u' unsigned, 'f' float, 'S' char, 'R' struct rec */
	uint32_t elem;          /* the value's size */
	uint32_t count;         /* elements of an array field, 1 otherwise */
	uint32_t total;         /* sizeof the struct */
};

#define KIND(x) _Generic((x), char: 'S', signed char: 'i', unsigned char: 'u', short: 'i', \
	unsigned short: 'u', int: 'i', unsigned: 'u', long: 'i', unsigned long: 'u', long long: 'i', \
	unsigned long long: 'u', float: 'f', double: 'f')
#define M(S, f) (((S *)0)->f)
#define IS_REC(x) __builtin_types_compatible_p(__typeof__(x), struct rec)
/* The entries: a value, an array of values, a pointer to values, a pointer to pointers to values,
 * a pointer to struct rec (kind 'R'). A field of another shape than its entry says does not
 * compile (no kind for a pointer, no [0] of a value, a negative array size). */
#define VAL(S, f) { #S, #f, offsetof(S, f), sizeof(M(S, f)), 0, KIND(M(S, f)), sizeof(M(S, f)), 1, sizeof(S) },
#define ARR(S, f) { #S, #f, offsetof(S, f), sizeof(M(S, f)), 0, KIND(M(S, f)[0]), sizeof(M(S, f)[0]), \
		    sizeof(M(S, f)) / sizeof(M(S, f)[0]), sizeof(S) },
#define PTR(S, f) { #S, #f, offsetof(S, f), sizeof(M(S, f)), 1, KIND(M(S, f)[0]), sizeof(M(S, f)[0]), 1, \
		    sizeof(S) },
#define PTR2(S, f) { #S, #f, offsetof(S, f), sizeof(M(S, f)), 2, KIND(M(S, f)[0][0]), sizeof(M(S, f)[0][0]), \
		     1, sizeof(S) },
#define RECS(S, f) { #S, #f, offsetof(S, f), sizeof(M(S, f)), 1, 'R', \
		     sizeof(char[IS_REC(M(S, f)[0]) ? (long)sizeof(struct rec) : -1]), 1, sizeof(S) },

/* Each struct's fields in order, X(entry, S, field). */
#define REC_FIELDS(X, S) \
	X(VAL, S, type) X(VAL, S, cpu) X(VAL, S, tid) X(VAL, S, ts) X(VAL, S, pid) X(VAL, S, aux) X(VAL, S, a0)
#define EVENTS_HEADER_FIELDS(X, S) \
	X(ARR, S, magic) X(VAL, S, version) X(VAL, S, rec_size) X(VAL, S, count) X(VAL, S, drops) \
	X(VAL, S, ncpus) X(VAL, S, floor) X(ARR, S, reserved)
#define ITER_REC_FIELDS(X, S) \
	X(VAL, S, seq) X(VAL, S, t_start_ns) X(VAL, S, t_end_ns) X(VAL, S, run) X(VAL, S, metric) \
	X(VAL, S, cpu) X(VAL, S, tid) X(VAL, S, iteration)
#define ITER_HEADER_FIELDS(X, S) \
	X(ARR, S, magic) X(VAL, S, version) X(VAL, S, rec_size) X(VAL, S, count) X(VAL, S, nmetrics) \
	X(ARR, S, reserved)
#define RECORDS_FIELDS(X, S) X(VAL, S, n) X(RECS, S, rec) X(PTR, S, order)
#define WINDOWS_FIELDS(X, S) X(VAL, S, n) X(PTR, S, start) X(PTR, S, end) X(PTR, S, run) X(PTR, S, iter)
#define DECODED_FIELDS(X, S) \
	X(PTR, S, ts) X(PTR, S, type) X(PTR, S, cpu) X(PTR, S, pid) X(PTR, S, tid) X(PTR, S, aux) \
	X(PTR, S, a0) X(PTR, S, next_tid) X(PTR, S, next_pid) X(PTR, S, other_tid) X(PTR, S, other_pid) \
	X(PTR, S, run) X(PTR, S, iteration)
#define SCAN_IN_FIELDS(X, S) \
	X(VAL, S, n) X(RECS, S, rec) X(VAL, S, cal_tid) X(VAL, S, cal_nr) X(VAL, S, ncopy) X(PTR, S, copy_ids) \
	X(VAL, S, npids) X(PTR, S, pids)
#define SCAN_OUT_FIELDS(X, S) \
	X(PTR, S, calls) X(VAL, S, ncalls) X(PTR, S, tids) X(VAL, S, ntids) X(PTR, S, pairs) X(VAL, S, npairs) \
	X(VAL, S, copy_seen)
#define FINISH_IN_FIELDS(X, S) \
	X(VAL, S, g) X(PTR, S, grid) X(PTR, S, mode) X(PTR, S, run) X(PTR, S, overlay) X(VAL, S, ncarve) \
	X(PTR, S, c_at) X(PTR, S, c_len) X(PTR, S, c_state) X(PTR, S, c_from)
#define FINISH_OUT_FIELDS(X, S) X(PTR, S, ts) X(PTR, S, st)
#define EVENTS_FIELDS(X, S) \
	X(VAL, S, n) X(PTR, S, ts) X(PTR, S, type) X(PTR, S, tid) X(PTR, S, next_tid) X(PTR, S, cpu) \
	X(PTR, S, aux) X(PTR, S, a0)
#define STEP_OPTIONS_FIELDS(X, S) \
	X(PTR, S, codes) X(PTR, S, data_kind) X(VAL, S, ndata) X(VAL, S, cap) X(VAL, S, entry_in) \
	X(VAL, S, entry_out) X(VAL, S, copy_call) X(VAL, S, copy_byte) X(VAL, S, want)
#define THREAD_OUT_FIELDS(X, S) \
	X(PTR, S, grid) X(PTR, S, mode) X(PTR, S, run) \
	X(PTR, S, wake_on) X(PTR, S, wake_delay) X(PTR, S, wake_rq) X(VAL, S, nwake) \
	X(PTR, S, sleep_end) X(PTR, S, sleep_waker) X(VAL, S, nsleep) \
	X(PTR, S, in_ts) X(PTR, S, in_cpu) X(VAL, S, nin) \
	X(PTR, S, call_enter) X(PTR, S, call_exit) X(PTR, S, call_nr) X(PTR, S, call_ret) X(VAL, S, ncall) \
	X(PTR, S, woke_ts) X(PTR, S, woke_waker) X(VAL, S, nwoke) \
	X(PTR, S, carve_at) X(PTR, S, carve_len) X(PTR, S, carve_state) X(PTR, S, carve_from) X(VAL, S, ncarve)
#define CAUSAL_IN_FIELDS(X, S) \
	X(PTR2, S, ts) X(PTR2, S, st) X(PTR, S, len) \
	X(PTR2, S, sleep_end) X(PTR2, S, sleep_waker) X(PTR, S, nsleep) \
	X(PTR2, S, in_ts) X(PTR2, S, in_cpu) X(PTR, S, nin) \
	X(PTR2, S, deliv_at) X(PTR2, S, deliv_by) X(PTR, S, ndeliv) \
	X(PTR, S, occ_off) X(PTR, S, occ_ts) X(PTR, S, occ_who) X(PTR, S, occ_tid) \
	X(PTR, S, s) X(PTR, S, e) X(VAL, S, n) X(VAL, S, k) X(VAL, S, ncpu)
#define CAUSAL_OPTIONS_FIELDS(X, S) X(VAL, S, nsides) X(VAL, S, edge_states) X(VAL, S, holders_only)
#define CAUSAL_OUT_FIELDS(X, S) \
	X(PTR, S, out) X(PTR, S, seg_w) X(PTR, S, seg_a) X(PTR, S, seg_b) X(PTR, S, seg_thread) \
	X(PTR, S, seg_st) X(PTR, S, seg_holder) X(VAL, S, seg_cap) X(VAL, S, seg_lost)

/* Every layout: (C type, its field list). */
#define IPT_LAYOUTS(L) \
	L(struct rec, REC_FIELDS) \
	L(struct events_file_header, EVENTS_HEADER_FIELDS) \
	L(struct iter_rec, ITER_REC_FIELDS) \
	L(struct iter_file_header, ITER_HEADER_FIELDS) \
	L(struct ipt_records, RECORDS_FIELDS) \
	L(struct ipt_windows, WINDOWS_FIELDS) \
	L(struct ipt_decoded, DECODED_FIELDS) \
	L(struct ipt_scan_in, SCAN_IN_FIELDS) \
	L(struct ipt_scan_out, SCAN_OUT_FIELDS) \
	L(struct ipt_events, EVENTS_FIELDS) \
	L(struct ipt_step_options, STEP_OPTIONS_FIELDS) \
	L(struct ipt_thread_out, THREAD_OUT_FIELDS) \
	L(struct ipt_finish_in, FINISH_IN_FIELDS) \
	L(struct ipt_finish_out, FINISH_OUT_FIELDS) \
	L(struct ipt_causal_in, CAUSAL_IN_FIELDS) \
	L(struct ipt_causal_options, CAUSAL_OPTIONS_FIELDS) \
	L(struct ipt_causal_out, CAUSAL_OUT_FIELDS)

#define ENTRY(how, S, f) how(S, f)
#define ENTRIES(S, FIELDS) FIELDS(ENTRY, S)
#define PLUS_SIZE(how, S, f) + sizeof(M(S, f))
#define FILLED(S, FIELDS) \
	_Static_assert(0 FIELDS(PLUS_SIZE, S) == sizeof(S), "analysis/store/layout.c lists fewer fields than " #S " has");

IPT_LAYOUTS(FILLED)

static const struct ipt_field fields[] = { IPT_LAYOUTS(ENTRIES) { 0 } };

/* The i-th field of the table (struct ipt_field above, in clib.py's ctypes), NULL past the end. */
const struct ipt_field *ipt_layout(int i)
{
	return i >= 0 && (size_t)i < sizeof(fields) / sizeof(fields[0]) - 1 ? &fields[i] : NULL;
}

/* The constants the analysis reads in records, and the files' magics: a number, or text. */
struct ipt_constant {
	const char *name;       /* NULL: the table's end */
	int64_t value;
	const char *text;       /* NULL: a number */
};

#define NUM(c) { #c, (int64_t)(c), NULL },
#define TEXT(c) { #c, 0, c },
static const struct ipt_constant constants[] = {
	TEXT(EVENTS_FILE_MAGIC) NUM(EVENTS_FILE_VERSION) TEXT(ITER_FILE_MAGIC) NUM(ITER_FILE_VERSION)
	NUM(WAKE_IN_HARDIRQ) NUM(WAKE_CPU_MASK) NUM(MSG_SEND) NUM(MSG_RECV) NUM(MSG_UNREAD)
	NUM(MARK_BEGIN) NUM(MARK_END) NUM(NR_REPLACED)
	{ NULL, 0, NULL },
};

/* The i-th constant, NULL past the end. */
const struct ipt_constant *ipt_constant(int i)
{
	return i >= 0 && (size_t)i < sizeof(constants) / sizeof(constants[0]) - 1 ? &constants[i] : NULL;
}
