/*
 * The result of a run as JSON (docs/design.md contract 3; remora/sim.h rm_sim_result_json).
 */
#include <string.h>

#include "remora/json.h"
#include "sim_internal.h"

static json_t *seconds(rm_time_ps t)
{
	return json_real(rm_time_to_s(t));
}

json_t *rm_sim_result_json(const rm_sim *sim)
{
	const rm_sim_metrics *m = &sim->m;
	const rm_program *prog = sim->prog;
	json_t *doc = json_object();
	json_object_set_new(doc, "schema", json_string(RM_RESULT_SCHEMA));
	json_object_set_new(doc, "program", rm_json_string(prog->name));
	json_object_set_new(doc, "hardware", rm_json_string(sim->hw->name));
	json_object_set_new(doc, "hardware_queues", json_integer(sim->opt.hw_queues));
	json_object_set_new(doc, "cost_model", json_string(sim->opt.cost->name));
	json_object_set_new(doc, "step_time_s", seconds(m->step_time));
	json_object_set_new(doc, "step_time_ps", json_integer((json_int_t)m->step_time));
	json_object_set_new(doc, "tokens_per_s_per_gpu",
			    prog->tokens > 0 ? json_real(m->tokens_per_s) : json_null());
	json_object_set_new(doc, "mfu", json_real(m->mfu));
	json_object_set_new(doc, "model_flops", json_real(m->model_flops));
	json_object_set_new(doc, "peak_memory_bytes", json_integer(m->peak_memory_bytes));
	/* the same figure by PyTorch's name (torch.cuda.max_memory_allocated), beside the reserved */
	json_object_set_new(doc, "peak_allocated_bytes", json_integer(m->peak_memory_bytes));
	json_object_set_new(doc, "peak_host_memory_bytes", json_integer(m->peak_host_bytes));
	json_object_set_new(doc, "memory_capacity_bytes", json_integer(m->memory_capacity_bytes));
	json_object_set_new(doc, "memory_usable_bytes", json_integer(m->memory_usable_bytes));
	json_object_set_new(doc, "fits", json_boolean(m->fits));
	json_object_set_new(doc, "allocator", json_string(rm_sim_allocator_name(sim->opt.allocator)));
	json_object_set_new(doc, "peak_reserved_bytes", json_integer(m->peak_reserved_bytes));
	json_object_set_new(doc, "reserved_at_peak_bytes", json_integer(m->reserved_at_peak_bytes));
	json_object_set_new(doc, "num_alloc_retries", json_integer(m->num_alloc_retries));
	json_object_set_new(doc, "num_ooms", json_integer(m->num_ooms));
	json_object_set_new(doc, "first_oom_op",
			    m->first_oom_op >= 0 ? rm_json_string(prog->ops[m->first_oom_op].name)
						 : json_null());
	json_object_set_new(doc, "compute_busy_s", seconds(m->compute_busy));
	json_object_set_new(doc, "comm_total_s", seconds(m->comm_total));
	json_object_set_new(doc, "exposed_comm_s", seconds(m->exposed_comm));
	json_object_set_new(doc, "recompute_s", seconds(m->recompute));
	json_object_set_new(doc, "lower_bound_s", seconds(m->lower_bound));

	/* Collectives: sync ones run on a compute stream; reasons counted in first-seen order. */
	json_t *coll = json_object();
	json_t *reasons = json_object();
	for (int32_t i = 0; i < prog->n_ops; i++) {
		const rm_program_op *op = &prog->ops[i];
		if (op->cost.kind != RM_COST_COLLECTIVE ||
		    prog->streams[op->stream].kind != RM_STREAM_COMPUTE)
			continue;
		const char *why = op->sync_reason ? op->sync_reason : "unspecified";
		json_t *c = json_object_get(reasons, why);
		json_object_set_new(reasons, why,
				    json_integer(c ? json_integer_value(c) + 1 : 1));
	}
	json_object_set_new(coll, "total", json_integer(m->collectives));
	json_object_set_new(coll, "async", json_integer(m->collectives - m->sync_collectives));
	json_object_set_new(coll, "sync", json_integer(m->sync_collectives));
	json_object_set_new(coll, "sync_reasons", reasons);
	json_object_set_new(doc, "collectives", coll);

	json_t *streams = json_array();
	for (int32_t s = 0; s < prog->n_streams; s++) {
		json_t *o = json_object();
		json_object_set_new(o, "name", rm_json_string(prog->streams[s].name));
		json_object_set_new(o, "kind", json_string(rm_stream_kind_name(prog->streams[s].kind)));
		json_object_set_new(o, "busy_s", seconds(sim->stream_busy[s]));
		json_array_append_new(streams, o);
	}
	json_object_set_new(doc, "streams", streams);
	json_object_set_new(doc, "ops", json_integer(prog->n_ops));
	json_object_set_new(doc, "events", json_integer((json_int_t)m->events));
	return doc;
}
