/* libfyaml helpers (common/fy_util.h). */
#include "common/fy_util.h"

void rm__fy_node_position(struct fy_node *n, int *line, int *col)
{
	*line = *col = 0;
	while (n && !fy_node_is_scalar(n)) {
		if (fy_node_is_mapping(n)) {
			struct fy_node_pair *p = fy_node_mapping_get_by_index(n, 0);
			n = p ? fy_node_pair_key(p) : NULL;
		} else if (fy_node_is_sequence(n)) {
			n = fy_node_sequence_get_by_index(n, 0);
		} else {
			n = NULL;
		}
	}
	struct fy_token *t = n ? fy_node_get_scalar_token(n) : NULL;
	const struct fy_mark *m = t ? fy_token_start_mark(t) : NULL;
	if (!m)
		return;
	*line = m->line + 1;
	*col = m->column + 1;
	enum fy_node_style st = fy_node_get_style(n);
	if ((st == FYNS_DOUBLE_QUOTED || st == FYNS_SINGLE_QUOTED) && *col > 1)
		(*col)--;
}
