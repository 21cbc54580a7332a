/*
 * Fusion of memory-bound ops (schedules/fusion.h). The rules follow XLA's GPU fusion passes
 * (docs/sim.md "Fusion"):
 * - producer-consumer fusion (xla/service/gpu/transforms/priority_fusion.cc, with the legality
 *   checks of xla/service/gpu/gpu_fusible.cc IsProducerConsumerFusible): an elementwise producer
 *   fuses into its elementwise or reduction consumer; a reduction producer takes an elementwise
 *   consumer as its epilogue (xla_gpu_enable_reduction_epilogue_fusion, on by default); two
 *   reductions do not share a kernel; library calls (cuBLAS GEMMs, cuDNN / flash attention custom
 *   calls) are not loop-fusible;
 * - multi-output fusion (xla/service/gpu/transforms/multi_output_fusion.cc): a fused producer's
 *   value that something outside the fusion still reads is written as a second output instead of
 *   keeping the producer a kernel of its own;
 * - the GEMM rewriter (xla/service/gpu/transforms/gemm_rewriter.cc, FuseMatrixBiasAdd), which runs
 *   before fusion: add(gemm, c) where the add is the GEMM's only user becomes the cuBLAS call with
 *   c as its C operand and beta = 1;
 * - horizontal loop fusion (xla/service/gpu/transforms/horizontal_loop_fusion.cc): sibling loop
 *   fusions that feed the same consumer run as one kernel (one launch, the same bytes).
 * The backward ops carry no values in remora's graph; consecutive elementwise data-gradient ops
 * where the second differentiates a producer of the first's forward inputs form a producer-
 * consumer pair on the gradient between them.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "schedules/fusion.h"

static bool is_reduction(rm_membound_class c)
{
	return c == RM_MB_NORM || c == RM_MB_NORM_BWD || c == RM_MB_SOFTMAX;
}

/* Ops that may join a fusion at all. */
static bool fusible(const rm_graph *g, const bool *run, int i, sched_fusion_opts opts)
{
	const rm_op *op = &g->ops[i];
	if (run && !run[i])
		return false;
	if (op->kind != RM_OP_ELEMENTWISE || (opts.no_complex && op->complex_arith))
		return false;
	return op->mclass != RM_MB_GATHER && op->mclass != RM_MB_OPTIMIZER;
}

static int reductions_in(const rm_graph *g, const int *grp, int a)
{
	int n = 0;
	for (int i = 0; i < g->n_ops; i++)
		if (grp[i] == a && is_reduction(g->ops[i].mclass))
			n++;
	return n;
}

/* Whether fusions a and b may become one kernel placed at the first op of the two: every
 * external input of their ops is produced (by a running op) before it. */
static bool placeable(const rm_graph *g, const bool *run, const int *grp, int a, int b)
{
	int first = a < b ? a : b;
	for (int i = first; i < g->n_ops; i++) {
		if (grp[i] != a && grp[i] != b)
			continue;
		const rm_op *op = &g->ops[i];
		for (int k = 0; k < op->n_inputs; k++) {
			int p = g->values[op->inputs[k]].producer;
			if (p < 0 || (run && !run[p]) || grp[p] == a || grp[p] == b)
				continue;
			if (p >= first)
				return false;
		}
	}
	return true;
}

/* Relabels fusion b into a; the label is the first op. */
static void merge(int n, int *grp, int a, int b)
{
	int to = a < b ? a : b, from = a < b ? b : a;
	for (int i = 0; i < n; i++)
		if (grp[i] == from)
			grp[i] = to;
}

/* Bytes of value v as its producer writes it: the producer's own count when v is its only
 * output (a chunked loss keeps one chunk live but moves the whole tensor), else v's size. */
static int64_t moved_bytes(const rm_graph *g, int v)
{
	int p = g->values[v].producer;
	if (p >= 0 && g->ops[p].n_outputs == 1)
		return g->ops[p].bytes_written;
	return g->values[v].bytes;
}

static bool all_pointwise(const rm_graph *g, const int *grp, int a)
{
	for (int i = 0; i < g->n_ops; i++)
		if (grp[i] == a && g->ops[i].mclass != RM_MB_POINTWISE)
			return false;
	return true;
}

static bool small_outputs(const rm_graph *g, const int *grp, int a)
{
	for (int i = 0; i < g->n_ops; i++) {
		if (grp[i] != a)
			continue;
		for (int k = 0; k < g->ops[i].n_outputs; k++) {
			const rm_value *v = &g->values[g->ops[i].outputs[k]];
			int64_t elems = 1;
			for (int d = 0; d < v->rank; d++)
				elems *= v->shape[d];
			if (elems > SCHED_FUSION_HORIZONTAL_MAX_ELEMS)
				return false;
		}
	}
	return true;
}

/* A binary op whose backward needs no forward value is linear in both operands: an add (a
 * multiply's backward reads both operands). */
static bool is_add(const rm_graph *g, int i)
{
	const rm_op *op = &g->ops[i];
	if (op->kind != RM_OP_ELEMENTWISE || op->mclass != RM_MB_POINTWISE || op->n_inputs != 2 || op->n_outputs != 1)
		return false;
	for (int b = g->n_fwd_ops; b < g->n_ops; b++)
		if (g->ops[b].fwd_op == i)
			return g->ops[b].n_residuals == 0;
	return false;
}

/* Adds that become the C operand of the GEMM whose only use they are. */
static void fuse_gemm_epilogues(const rm_graph *g, const bool *run, const bool *keep, sched_fusion *out, int *grp)
{
	for (int c = 0; c < g->n_fwd_ops; c++) {
		if (grp[c] < 0 || !is_add(g, c))
			continue;
		for (int k = 0; k < 2; k++) {
			int v = g->ops[c].inputs[k], p = g->values[v].producer;
			if (p < 0 || (run && !run[p]) || g->ops[p].kind != RM_OP_GEMM || g->ops[p].n_outputs != 1 ||
			    (keep && keep[v]))
				continue;
			int users = 0;
			for (int u = 0; u < g->n_fwd_ops; u++)
				for (int q = 0; q < g->ops[u].n_inputs && (!run || run[u]); q++)
					users += g->ops[u].inputs[q] == v;
			if (users != 1)
				continue;
			out->ops[c].epilogue_of = p;
			out->written[v] = false;
			grp[c] = -1;
			break;
		}
	}
}

/* Forward: producer-consumer fusion in program order, then horizontal fusion of the sibling
 * pointwise fusions of each consumer. */
static void fuse_forward(const rm_graph *g, const bool *run, sched_fusion_opts opts, int *grp)
{
	for (int c = 0; c < g->n_fwd_ops; c++) {
		if (grp[c] < 0)
			continue;
		const rm_op *op = &g->ops[c];
		for (int k = 0; k < op->n_inputs; k++) {
			int p = g->values[op->inputs[k]].producer;
			if (p < 0 || grp[p] < 0 || grp[p] == grp[c])
				continue;
			if (reductions_in(g, grp, grp[p]) + reductions_in(g, grp, grp[c]) > 1)
				continue;
			if (!placeable(g, run, grp, grp[p], grp[c]))
				continue;
			merge(g->n_ops, grp, grp[p], grp[c]);
		}
	}
	if (!opts.horizontal)
		return;
	for (int c = 0; c < g->n_fwd_ops; c++) {
		if (run && !run[c])
			continue;
		const rm_op *op = &g->ops[c];
		int sib = -1;
		for (int k = 0; k < op->n_inputs; k++) {
			int p = g->values[op->inputs[k]].producer;
			if (p < 0 || grp[p] < 0 || grp[p] == grp[c] || !all_pointwise(g, grp, grp[p]) ||
			    !small_outputs(g, grp, grp[p]))
				continue;
			if (sib < 0) {
				sib = grp[p];
			} else if (grp[p] != sib && placeable(g, run, grp, sib, grp[p])) {
				merge(g->n_ops, grp, sib, grp[p]);
				sib = sib < grp[p] ? sib : grp[p];
			}
		}
	}
}

static int64_t residual_bytes(const rm_graph *g, const rm_op *op)
{
	int64_t b = 0;
	for (int k = 0; k < op->n_residuals; k++)
		b += g->values[op->residuals[k]].bytes;
	return b;
}

/* Backward: consecutive data-gradient ops A, B where B differentiates the producer of one of
 * A's forward inputs: B reads the gradient A writes. */
static void fuse_backward(const rm_graph *g, int *grp, sched_fusion_op *fo)
{
	for (int a = g->n_fwd_ops; a + 1 < g->n_ops; a++) {
		int b = a + 1;
		const rm_op *A = &g->ops[a], *B = &g->ops[b];
		if (grp[a] < 0 || grp[b] < 0 || A->phase != RM_PHASE_BWD_DGRAD ||
		    B->phase != RM_PHASE_BWD_DGRAD || A->fwd_op < 0 || B->fwd_op < 0)
			continue;
		const rm_op *fa = &g->ops[A->fwd_op], *fb = &g->ops[B->fwd_op];
		bool feeds = false;
		for (int k = 0; k < fa->n_inputs && fb->n_outputs > 0; k++)
			feeds |= fa->inputs[k] == fb->outputs[0];
		if (!feeds || reductions_in(g, grp, grp[a]) + reductions_in(g, grp, grp[b]) > 1)
			continue;
		int64_t edge = B->bytes_read - residual_bytes(g, B);
		if (edge > A->bytes_written)
			edge = A->bytes_written;
		if (edge <= 0)
			continue;
		merge(g->n_ops, grp, grp[a], grp[b]);
		fo[a].grad_internal = edge;
	}
}

void sched_fusion_build(const rm_graph *g, const bool *run, const bool *keep, sched_fusion_opts opts,
			sched_fusion *out)
{
	assert(g && out);
	memset(out, 0, sizeof(*out));
	out->n_ops = g->n_ops;
	out->n_values = g->n_values;
	out->ops = rm_new(sched_fusion_op, (size_t)g->n_ops + 1);
	out->written = rm_new(bool, (size_t)g->n_values + 1);
	int *grp = rm_new(int, (size_t)g->n_ops + 1);
	for (int v = 0; v < g->n_values; v++)
		out->written[v] = true;
	for (int i = 0; i < g->n_ops; i++) {
		grp[i] = fusible(g, run, i, opts) ? i : -1;
		out->unfused_kernels += grp[i] >= 0;
		out->ops[i].epilogue_of = -1;
	}
	if (opts.gemm_epilogue)
		fuse_gemm_epilogues(g, run, keep, out, grp);
	fuse_forward(g, run, opts, grp);
	fuse_backward(g, grp, out->ops);

	/* values: written unless required by no one outside their producer's fusion */
	for (int v = 0; v < g->n_values; v++) {
		int p = g->values[v].producer;
		bool internal = p >= 0 && grp[p] >= 0 && !(keep && keep[v]);
		bool read = false;
		for (int c = 0; c < g->n_fwd_ops && internal; c++) {
			if (run && !run[c])
				continue;
			for (int k = 0; k < g->ops[c].n_inputs; k++)
				if (g->ops[c].inputs[k] == v) {
					read = true;
					internal &= grp[c] == grp[p];
				}
		}
		if (internal && read)
			out->written[v] = false;
	}

	/* each fusion's kernel on its first op */
	for (int i = 0; i < g->n_ops; i++) {
		sched_fusion_op *f = &out->ops[i];
		f->fusion = f->epilogue_of >= 0 ? i : grp[i];
		if (grp[i] < 0)
			continue;
		const rm_op *op = &g->ops[i];
		sched_fusion_op *h = &out->ops[grp[i]];
		if (grp[i] == i) {
			h->kernels = 1;
			h->cls = op->mclass;
			out->kernels++;
		}
		if (is_reduction(op->mclass))
			h->cls = op->mclass;
		h->bytes_read += op->bytes_read;
		h->bytes_written += op->bytes_written;
		h->flops += op->flops;
		/* forward: reads of values produced inside the fusion; values not written */
		for (int k = 0; k < op->n_inputs && op->phase == RM_PHASE_FWD; k++) {
			int v = op->inputs[k], p = g->values[v].producer;
			if (p >= 0 && grp[p] == grp[i]) {
				int64_t b = moved_bytes(g, v);
				h->bytes_read -= b < op->bytes_read ? b : op->bytes_read;
			}
		}
		for (int k = 0; k < op->n_outputs && op->phase == RM_PHASE_FWD; k++)
			if (!out->written[op->outputs[k]])
				h->bytes_written -= moved_bytes(g, op->outputs[k]);
		/* backward: the gradient passed to the next op of the fusion */
		h->bytes_read -= f->grad_internal;
		h->bytes_written -= f->grad_internal;
	}
	for (int i = 0; i < g->n_ops; i++) {
		sched_fusion_op *f = &out->ops[i];
		if (f->fusion < 0 || f->fusion != i)
			continue;
		if (f->bytes_read < 0)
			f->bytes_read = 0;
		if (f->bytes_written < 0)
			f->bytes_written = 0;
	}
	free(grp);
}

void sched_fusion_finish(sched_fusion *f)
{
	if (!f)
		return;
	free(f->ops);
	free(f->written);
	memset(f, 0, sizeof(*f));
}

bool sched_fusion_cost(const sched_fusion *f, int i, rm_elementwise_cost *out)
{
	if (!f || !f->ops || i < 0 || i >= f->n_ops || f->ops[i].fusion < 0)
		return false;
	const sched_fusion_op *o = &f->ops[i];
	if (o->epilogue_of >= 0) {
		*out = (rm_elementwise_cost){.kernels = 0};
		return true;
	}
	if (o->fusion != i) {
		*out = (rm_elementwise_cost){.cls = f->ops[o->fusion].cls, .kernels = 0};
		return true;
	}
	*out = (rm_elementwise_cost){.bytes_read = o->bytes_read, .bytes_written = o->bytes_written, .flops = o->flops, .cls = o->cls, .kernels = 1};
	return true;
}

int64_t sched_fusion_grad_bytes(const sched_fusion *f, const rm_graph *g, int i, int64_t default_bytes)
{
	if (!f || !f->ops || i < 0 || i >= f->n_ops || f->ops[i].grad_internal <= 0)
		return default_bytes;
	const sched_fusion_op *o = &f->ops[i];
	if (o->grad_internal >= g->ops[i].bytes_written)
		return 0;
	int64_t b = default_bytes - o->grad_internal;
	return b > 0 ? b : 0;
}
