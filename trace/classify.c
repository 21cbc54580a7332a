/*
 * The class of a GPU event and the parse of NCCL kernel names (remora/trace.h). The one table of
 * patterns is below; each row says where the pattern was seen.
 */
#include <strings.h>
#include <stdio.h>
#include <string.h>

#include "remora/trace.h"

static const char *const class_key[] = {
#define RM_TRACE_CLASS_KEY(name, key, compute) [RM_TRACE_##name] = key,
	RM_TRACE_CLASS_MAP(RM_TRACE_CLASS_KEY)
#undef RM_TRACE_CLASS_KEY
};

static const bool class_compute[] = {
#define RM_TRACE_CLASS_COMPUTE(name, key, compute) [RM_TRACE_##name] = compute,
	RM_TRACE_CLASS_MAP(RM_TRACE_CLASS_COMPUTE)
#undef RM_TRACE_CLASS_COMPUTE
};

const char *rm_trace_class_key(rm_trace_class cls)
{
	return (unsigned)cls < RM_TRACE_CLASS_COUNT ? class_key[cls] : "unknown";
}

bool rm_trace_class_is_compute(rm_trace_class cls)
{
	return (unsigned)cls < RM_TRACE_CLASS_COUNT && class_compute[cls];
}

/* Where a pattern is looked for. */
typedef enum { ON_CAT, ON_NAME, ON_XLA_OP } pattern_field;

typedef struct pattern_row {
	pattern_field field;
	bool prefix;          /* the field starts with needle (after "void "); else contains it */
	const char *needle;   /* compared without regard to case */
	rm_trace_class cls;
} pattern_row;

/*
 * The first matching row wins, so NCCL and copies come before attention, attention before GEMM
 * (cutlass-based flash kernels also say "cutlass"), GEMM before the default (memory-bound).
 */
static const pattern_row patterns[] = {
	/* Kineto's activity categories: libkineto/src/output_json.cpp writes "gpu_memcpy" and
	 * "gpu_memset" for CUPTI memcpy/memset activities (seen in every trace under
	 * HolisticTraceAnalysis tests/data, e.g. nccl_parser_config/nccl_data.json.gz). */
	{ON_CAT, false, "gpu_memcpy", RM_TRACE_MEMCPY},
	{ON_CAT, false, "gpu_memset", RM_TRACE_MEMSET},
	/* NCCL: "ncclKernel_AllReduce_RING_LL_Sum_float(...)" (NCCL <= 2.18, HTA nccl_data.json.gz,
	 * trace_filter/sampled_rank-0.json.gz), "ncclDevKernel_AllGather_RING_LL(...)" (NCCL >= 2.19,
	 * nccl src/device/generate.py), "ncclSymkDevKernel_*" (2.27 symmetric kernels). HTA's
	 * CommunicateKernelGroupingPattern (hta/common/types.py) also matches names starting nccl. */
	{ON_NAME, true, "nccl", RM_TRACE_NCCL},
	{ON_NAME, false, "ncclKernel", RM_TRACE_NCCL},
	{ON_NAME, false, "ncclDevKernel", RM_TRACE_NCCL},
	/* Copies named as CUPTI names them ("Memcpy DtoD (Device -> Device)", "Memset (Device)":
	 * HTA MemoryKernelGroupingPattern ^Memcpy|^Memset) and JAX's copy lines. */
	{ON_NAME, true, "Memcpy", RM_TRACE_MEMCPY},
	{ON_NAME, true, "Memset", RM_TRACE_MEMSET},
	/* Attention: FlashAttention 2/3 ("flash_fwd_kernel", "flash::flash_bwd..."), cuDNN and XLA
	 * fused MHA ("fmha", "cudnn_generated_fort_native_sdpa"), PyTorch's memory-efficient kernels
	 * ("fmha_cutlassF"/"fmha_cutlassB", aten/src/ATen/native/transformers/cuda/mem_eff_attention),
	 * Triton's tutorial "_attn_fwd"/"_attn_bwd". */
	{ON_NAME, false, "flash", RM_TRACE_ATTENTION},
	{ON_NAME, false, "fmha", RM_TRACE_ATTENTION},
	{ON_NAME, false, "sdpa", RM_TRACE_ATTENTION},
	{ON_NAME, false, "attn_fwd", RM_TRACE_ATTENTION},
	{ON_NAME, false, "attn_bwd", RM_TRACE_ATTENTION},
	{ON_NAME, false, "attention", RM_TRACE_ATTENTION},
	/* FBGEMM's embedding kernels say "gemm" in their namespace but are gathers and permutes
	 * ("void fbgemm_gpu::permute_2D_lengths_kernel<int>(...)", HTA
	 * trace_filter/sampled_rank-0.json.gz and negative_queue_length_values_check/rank0.json.gz). */
	{ON_NAME, true, "fbgemm_gpu::", RM_TRACE_MEMORY_BOUND},
	/* GEMM: cuBLAS/cuBLASLt kernels ("ampere_sgemm_128x64_nn", "sm90_xmma_gemm_..."; "nvjet_*" of
	 * cuBLAS 12.x on Hopper), CUTLASS ("cutlass_80_tensorop_s1688gemm", "cutlass::Kernel2"),
	 * Triton/XLA GEMM fusions ("triton_gemm_dot", "gemm_fusion_dot"), cuDNN convolutions as implicit
	 * GEMM ("sm80_xmma_fprop_implicit_gemm"). */
	{ON_NAME, false, "gemm", RM_TRACE_GEMM},
	{ON_NAME, false, "cutlass", RM_TRACE_GEMM},
	{ON_NAME, false, "xmma", RM_TRACE_GEMM},
	{ON_NAME, false, "nvjet", RM_TRACE_GEMM},
	{ON_NAME, false, "cublas", RM_TRACE_GEMM},
	/* JAX: the XLA op behind a kernel (args hlo_op / long_name of xprof's trace viewer): the
	 * collectives (HLO opcode names, xla/hlo/ir/hlo_opcode.h), cuBLAS custom calls
	 * ("__cublas$gemm", "__cublas$lt$matmul"), cuDNN fused attention ("__cudnn$fmha"), dots. */
	{ON_XLA_OP, false, "all-gather", RM_TRACE_NCCL},
	{ON_XLA_OP, false, "all-reduce", RM_TRACE_NCCL},
	{ON_XLA_OP, false, "reduce-scatter", RM_TRACE_NCCL},
	{ON_XLA_OP, false, "all-to-all", RM_TRACE_NCCL},
	{ON_XLA_OP, false, "collective-permute", RM_TRACE_NCCL},
	{ON_XLA_OP, false, "fmha", RM_TRACE_ATTENTION},
	{ON_XLA_OP, false, "cublas", RM_TRACE_GEMM},
	{ON_XLA_OP, false, "gemm", RM_TRACE_GEMM},
	{ON_XLA_OP, true, "dot", RM_TRACE_GEMM},
};

/* Whether hay contains needle (ASCII, ignoring case). */
static bool contains_nocase(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	for (const char *p = hay; *p; p++)
		if (strncasecmp(p, needle, n) == 0)
			return true;
	return false;
}

static const char *strip_void(const char *s)
{
	while (*s == ' ')
		s++;
	return strncmp(s, "void ", 5) == 0 ? s + 5 : s;
}

rm_trace_class rm_trace_classify(const char *name, const char *cat, const char *xla_op)
{
	const char *n = strip_void(name ? name : "");
	for (size_t i = 0; i < RM_ARRAY_SIZE(patterns); i++) {
		const pattern_row *r = &patterns[i];
		const char *field = r->field == ON_CAT ? cat : r->field == ON_NAME ? n : xla_op;
		if (!field)
			continue;
		bool hit = r->prefix ? strncasecmp(field, r->needle, strlen(r->needle)) == 0
				     : contains_nocase(field, r->needle);
		if (hit)
			return r->cls;
	}
	return RM_TRACE_MEMORY_BOUND;
}

/* The tokens NCCL's kernel names are built from (nccl src/device/generate.py all_algos,
 * all_protos, all_redops; Min/Max of the <= 2.18 names). Two-token algorithms first. */
static const char *const nccl_algos[] = {"COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS_TREE", "TREE",
					 "RING", "NVLS", "PAT", "COLLNET"};
static const char *const nccl_protos[] = {"LL128", "LL", "SIMPLE"};
static const char *const nccl_redops[] = {"Sum", "Prod", "MinMax", "Min", "Max", "PreMulSum", "SumPostDiv"};

static void copy_tok(char *dst, size_t size, const char *src, size_t len)
{
	if (len >= size)
		len = size - 1;
	memcpy(dst, src, len);
	dst[len] = '\0';
}

bool rm_trace_nccl_parse(const char *name, rm_trace_nccl_name *out)
{
	memset(out, 0, sizeof(*out));
	const char *s = strip_void(name ? name : "");
	static const char *const prefixes[] = {"ncclSymkDevKernel_", "ncclDevKernel_", "ncclKernel_"};
	const char *p = NULL;
	for (size_t i = 0; i < RM_ARRAY_SIZE(prefixes) && !p; i++)
		if (strncmp(s, prefixes[i], strlen(prefixes[i])) == 0)
			p = s + strlen(prefixes[i]);
	if (!p)
		return false;
	/* the body ends at the parameter list or a template argument list */
	size_t len = strcspn(p, "(< ");
	const char *end = p + len;
	/* the first token is the collective */
	size_t tl = strcspn(p, "_");
	if (tl > len)
		tl = len;
	copy_tok(out->op, sizeof(out->op), p, tl);
	p += tl;
	while (p < end) {
		if (*p == '_')
			p++;
		size_t rest = (size_t)(end - p);
		bool matched = false;
		for (size_t i = 0; i < RM_ARRAY_SIZE(nccl_algos) && !matched; i++) {
			size_t al = strlen(nccl_algos[i]);
			if (rest >= al && strncmp(p, nccl_algos[i], al) == 0 && (rest == al || p[al] == '_')) {
				copy_tok(out->algo, sizeof(out->algo), p, al);
				p += al;
				matched = true;
			}
		}
		for (size_t i = 0; i < RM_ARRAY_SIZE(nccl_protos) && !matched; i++) {
			size_t pl = strlen(nccl_protos[i]);
			if (rest >= pl && strncmp(p, nccl_protos[i], pl) == 0 && (rest == pl || p[pl] == '_')) {
				copy_tok(out->proto, sizeof(out->proto), p, pl);
				p += pl;
				matched = true;
			}
		}
		for (size_t i = 0; i < RM_ARRAY_SIZE(nccl_redops) && !matched && !out->redop[0]; i++) {
			size_t rl = strlen(nccl_redops[i]);
			if (rest >= rl && strncmp(p, nccl_redops[i], rl) == 0 && (rest == rl || p[rl] == '_')) {
				copy_tok(out->redop, sizeof(out->redop), p, rl);
				p += rl;
				matched = true;
			}
		}
		if (matched)
			continue;
		/* anything else is the data type; old names spell some with an underscore
		 * ("int8_t", "uint64_t"): the type runs to the next known token or the end */
		const char *t = p;
		while (p < end) {
			size_t tok = strcspn(p, "_");
			if (tok > (size_t)(end - p))
				tok = (size_t)(end - p);
			p += tok;
			if (p >= end || strncmp(p, "_t", 2) != 0 || (p + 2 < end && p[2] != '_'))
				break;
			p += 2; /* "int8" + "_t" */
		}
		if (!out->type[0])
			copy_tok(out->type, sizeof(out->type), t, (size_t)(p - t));
	}
	return true;
}
