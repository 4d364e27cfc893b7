/* nbdkit-hhc-filter's parameters (params.c). */
#ifndef HHC_FILTER_PARAMS_H
#define HHC_FILTER_PARAMS_H

#include "hhccore.h"

/* The core's configuration the parameters fill. */
extern struct hhc_conf params_conf;

/* Defaults, with the core's messages going to log. */
void params_init (hhc_msg_fn msgfn);
void params_free (void);

/* One key=value: 0, -1 (an error was printed), or 1: not one of ours
 * (for the plugin).
 */
int params_set (const char *key, const char *value);

/* After the last parameter: what is required and must agree.  0 or -1
 * (an error was printed).
 */
int params_check (void);

#define params_help                                                            \
  "cache=PATH              (required) SSD cache: file or block device.\n"      \
  "cache-size=SIZE         Create the cache file with this size.\n"            \
  "mode=pt|wt|wb|wbflush|hhc  Cache mode (default hhc with log=, else wb).\n"  \
  "log=PATH                HDD log device (file or block device); repeat\n"    \
  "                        for mirrors.\n"                                     \
  "log-size=SIZE           Create missing log files with this size.\n"         \
  "segment-size=SIZE       Largest log segment (default 1M to 4M by the\n"     \
  "                        log's size).\n"                                     \
  "log-buffers=N           Segment buffers (default 4, or log-inflight+2).\n"  \
  "log-inflight=K          Barriers in flight at once (default 1).\n"          \
  "ssd-sync=flush|checkpoint  SSD commit on FLUSH, or at log checkpoints\n"    \
  "                        (write-ahead; default flush).\n"                    \
  "block-size=SIZE         Cache block size (default 4K).\n"                   \
  "dirty-low=PERCENT       Write-back starts here (default 20).\n"             \
  "dirty-high=PERCENT      Write-back at full speed (default 60).\n"           \
  "dirty-max=PERCENT       Writes wait above this (default 95).\n"             \
  "hot-ratio=N             Midpoint LRU hot:cold = N:1 (default 2).\n"         \
  "format=auto|force|never Format the cache device (default auto).\n"          \
  "backend-id=STRING       Identity the cache is tied to.\n"                   \
  "require-backend-id=BOOL Refuse to format for a plugin with no export\n"     \
  "                        description unless backend-id= (default true).\n"   \
  "log-lost=refuse|accept  Start without the redo of a blank or stale\n"       \
  "                        write-ahead log (default refuse).\n"                \
  "direct=BOOL             O_DIRECT on the cache device.\n"                    \
  "stats=FILE              JSON statistics, rewritten once a second.\n"        \
  "control=SOCKET          Unix socket for hhcctl (stats, drain).\n"           \
  "writeback-threads=N     Backend writes in flight (default 4).\n"            \
  "idle-ms=N               Full-speed write-back after N ms without\n"         \
  "                        requests (default 1000; 0: never).\n"               \
  "seq-cutoff=SIZE         Sequential streams longer than SIZE bypass the\n"   \
  "                        cache (default 0: off).\n"                          \
  "promote=always|nhit     Which read misses enter the cache (default\n"       \
  "                        always).\n"                                         \
  "promote-hits=N          nhit: misses of a block that promote it\n"          \
  "                        (default 2).\n"                                     \
  "promote-window=N        nhit: misses within which they count (default\n"    \
  "                        0: the cache's slots)."

#endif /* HHC_FILTER_PARAMS_H */
