/*
 * Private to remora: libfyaml helpers shared by the readers of config.json (models/) and of
 * scenario files (schedules/). Not a public header.
 */
#ifndef REMORA_FY_UTIL_H
#define REMORA_FY_UTIL_H

#include <libfyaml.h>

/*
 * 1-based line and column where a node starts (0, 0 when unknown). libfyaml 0.7 exposes marks on
 * tokens only: a scalar's own token (a quoted scalar's opening quote), a collection's first
 * scalar.
 */
void rm__fy_node_position(struct fy_node *node, int *line, int *column);

#endif /* REMORA_FY_UTIL_H */
