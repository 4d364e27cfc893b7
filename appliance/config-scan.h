/* The position scanner of hhc-gateway.json (config-scan.c).
 *
 * jansson keeps no positions, so after it has accepted the text this
 * scanner walks the text again and builds a position tree: one node
 * per JSON value, its children in document order, so that a message
 * can say LINE:COL of a value (config.c says how the validator walks
 * both trees together).  It also finds the first duplicate key,
 * which makes jansson fail, to name its path and position.
 */
#ifndef HHC_APPLIANCE_CONFIG_SCAN_H
#define HHC_APPLIANCE_CONFIG_SCAN_H

#include <stdbool.h>
#include <stddef.h>

#include "cleanup.h"
#include "vector.h"

#define NO_NODE ((size_t)-1)

/* One JSON value.  Node 0 is the root; children link first -> next. */
struct pnode {
  unsigned line, col;   /* where the value starts */
  unsigned kline, kcol; /* where its key starts (members only) */
  const char *key;      /* the key as written (members only), or NULL */
  size_t keylen;
  size_t parent, first, next, last; /* 0: none (except root's parent) */
};

HHC_VECTOR (ptree, struct pnode)

/* Build t from text (which jansson has accepted, or, with find_dup,
 * refused for a duplicate key).  A failure leaves t holding the nodes
 * scanned so far.  With find_dup, the duplicate key's node or 0.
 */
size_t scan_tree (struct ptree *t, const char *text, size_t len, bool find_dup);
/* The i-th child of node, or NO_NODE. */
size_t ptree_child (const struct ptree *t, size_t node, size_t i);
/* The path of node as a message names it (keys as written). */
void ptree_path (const struct ptree *t, size_t node, char *buf, size_t size);

#endif /* HHC_APPLIANCE_CONFIG_SCAN_H */
