/* tests/verify: hhc-verify, a verifying workload for crash and fault
 * campaigns (what it writes and checks: hhc-verify.c).  What its three
 * files share: the block format and the connection (hhc-verify.c), the
 * options and the run as main sets them, the base line a state file
 * gives, and the two commands (hhc-verify-write.c, hhc-verify-check.c).
 */
#ifndef HHC_VERIFY_H
#define HHC_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include <libnbd.h>

#define MAGIC "HHCVRFY1"
#define HDR 40 /* magic 8, lba 8, writer 4, pad 4, seq 8, run 8 */

/* Base line of a block: a write of an earlier run, or zeros. */
struct base {
  uint64_t run, seq;
  uint32_t writer;
  bool set;
};

/* The options (main, in hhc-verify.c) and the run. */
extern const char *uri;
extern unsigned nwriters;
extern uint32_t bs;
extern uint64_t nblocks;
extern uint64_t ops;
extern unsigned seconds;
extern unsigned flush_every;
extern unsigned fua_every;
extern unsigned zero_every;
extern bool tolerate_errors;
extern uint64_t seed;
extern uint64_t run;
extern bool expect_crash;
extern const char *ready_file; /* made once every writer is connected */
extern struct base *bases;     /* nblocks */

/* hhc-verify.c: the block format, the connection. */
uint64_t mix (uint64_t x);
void make_block (unsigned char *b, uint64_t lba, uint32_t writer, uint64_t seq,
                 uint64_t r);
struct nbd_handle *connect_or_die (void);

/* hhc-verify-write.c: the write command (the load, the journal). */
int do_write (const char *journal, const char *state);

/* hhc-verify-check.c: the check command. */
int do_check (const char *journal, const char *state_out);

#endif /* HHC_VERIFY_H */
