/* iscsi-backend: the plugin's parameters (see config.c). */
#ifndef HHCISCSI_CONFIG_H
#define HHCISCSI_CONFIG_H

#include "pool.h"

#define DEFAULT_INITIATOR "iqn.2026-01.org.hhc-gateway:initiator"

/* What the parameters ask for: set by .config and .config_complete,
 * read-only from .after_fork on (the pool keeps a pointer to it).
 */
extern struct pool_conf conf;

/* .config: KEY=VALUE into conf.  Returns -1 after nbdkit_error. */
extern int config_set (const char *key, const char *value);

/* .config_complete: the required keys, the default initiator and
 * port.  Returns -1 after nbdkit_error.
 */
extern int config_complete (void);

/* Free what conf holds, wiping the password first (.unload). */
extern void config_free (void);

/* .config_help. */
#define ISCSI_CONFIG_HELP                                                      \
  "url=iscsi://[USER[%PASSWORD]@]HOST[:PORT]/TARGET-IQN/LUN\n"                 \
  "                             The LUN (or portal=, target=, lun=).\n"        \
  "portal=HOST[:PORT]           Target portal (port 3260 by default).\n"       \
  "target=IQN                   Target name.\n"                                \
  "lun=N                        Logical unit number.\n"                        \
  "initiator=IQN                Our initiator name\n"                          \
  "                             (default " DEFAULT_INITIATOR ").\n"            \
  "user=NAME                    CHAP user name.\n"                             \
  "password=-|+FILE|-FD|SECRET  CHAP secret.\n"                                \
  "sessions=N                   iSCSI sessions in the pool (default 4).\n"     \
  "timeout=SECS                 Per-command timeout (default: none)."

#endif /* HHCISCSI_CONFIG_H */
